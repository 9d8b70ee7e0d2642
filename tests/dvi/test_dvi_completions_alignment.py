"""DVI's replay data where the tokenizer merges the generation prompt's last token with the answer's first.

ChatML ends the generation prompt with ``assistant\\n``; an answer that starts with ``\\n`` makes the conversation
encode ``\\n\\n`` as one token, so the prompt's tokens are no prefix of the conversation's. The target generated the
answer after the prompt's ``\\n``: its tokens are the answer's text after the prompt's, encoded on their own.
"""

from __future__ import annotations

import json

import pytest
from tiny_models import newline_merging_tokenizer
from transformers import PreTrainedTokenizerFast

from hf_adaptive_spec.training.dvi.data import load_completions
from hf_adaptive_spec.training_data.regenerate import prompt_ids

#: ChatML, with the last user turn trimmed as some templates do: a question with trailing blanks then renders
#: differently alone (the prompt) and inside its conversation, and cannot be aligned at all
CHATML_TRIMMING_THE_LAST_TURN = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{{ m['content'] | trim if loop.last and m['role'] == 'user' else m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def merging_tokenizer() -> PreTrainedTokenizerFast:
    """Characters, plus one merge: two newlines are one token (as byte-level BPE vocabularies have ``ĊĊ``)."""
    return newline_merging_tokenizer(list("abcdefghijklmnopqrstuvwxyz ,.?\n"), CHATML_TRIMMING_THE_LAST_TURN)


def _write(path, records):
    with open(path, "w", encoding="utf-8") as handle:
        for record_id, question, answer in records:
            turns = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            handle.write(json.dumps({"id": record_id, "conversation": turns}) + "\n")


def test_an_answer_starting_with_a_newline_follows_the_prompt_as_generated(merging_tokenizer, tmp_path):
    tokenizer = merging_tokenizer
    path = tmp_path / "answers.jsonl"
    _write(path, [("newline", "hello", "\nhi there"), ("plain", "what is it", "a cat")])
    user = [{"role": "user", "content": "hello"}]
    conversation = tokenizer.apply_chat_template([*user, {"role": "assistant", "content": "\nhi there"}],
                                                 tokenize=False)
    assert tokenizer(conversation, add_special_tokens=False)["input_ids"][: len(prompt_ids(tokenizer, user))] != \
        prompt_ids(tokenizer, user)  # the merge this test is about

    newline, plain = load_completions(tokenizer, path, num_prompts=2, max_prompt_tokens=64)
    assert newline["input_ids"] == prompt_ids(tokenizer, user)
    answer = tokenizer("\nhi there", add_special_tokens=False)["input_ids"]
    assert newline["completion_ids"] == answer + [tokenizer.eos_token_id]
    assert tokenizer.decode(newline["input_ids"] + newline["completion_ids"]) == conversation.removesuffix("\n")
    assert tokenizer.decode(plain["completion_ids"]) == "a cat<|im_end|>"


def test_records_that_cannot_be_aligned_are_skipped_with_one_warning(merging_tokenizer, tmp_path, caplog):
    path = tmp_path / "answers.jsonl"
    _write(path, [("first", "hello", "hi"), ("blank1", "hello ", "hi"), ("blank2", "what ", "a cat"),
                  ("last", "what", "a")])
    with caplog.at_level("WARNING"):
        records = load_completions(merging_tokenizer, path, num_prompts=2, max_prompt_tokens=64)
    assert [merging_tokenizer.decode(r["completion_ids"][:-1]) for r in records] == ["hi", "a"]
    assert caplog.text.count("skipped") == 1 and "skipped 2 records (the first: id 'blank1')" in caplog.text

    _write(path, [("blank1", "hello ", "hi")])
    with pytest.raises(ValueError, match="holds 0 usable conversations \\(1 skipped, see the warnings above\\)"):
        load_completions(merging_tokenizer, path, num_prompts=1, max_prompt_tokens=64)


def _write_with_ids(path, records):
    with open(path, "w", encoding="utf-8") as handle:
        for record_id, question, answer in records:
            turns = [{"role": "user", "content": question}, answer]
            handle.write(json.dumps({"id": record_id, "conversation": turns}) + "\n")


def test_an_answer_with_token_ids_is_those_ids_not_its_text_re_encoded(merging_tokenizer, tmp_path):
    """Regeneration keeps the ids the target generated: two single newlines here, which the text re-encodes as one."""
    tokenizer = merging_tokenizer
    ids = tokenizer.convert_tokens_to_ids(["a", "\n", "\n", "b"])
    answer = {"role": "assistant", "content": tokenizer.decode(ids), "token_ids": ids}
    assert tokenizer(answer["content"], add_special_tokens=False)["input_ids"] != ids  # the case this is about
    path = tmp_path / "answers.jsonl"
    _write_with_ids(path, [("ended", "hello", answer), ("cut", "what", {**answer, "truncated": True}),
                           ("text", "why", {"role": "assistant", "content": answer["content"]})])
    ended, cut, text = load_completions(tokenizer, path, num_prompts=3, max_prompt_tokens=64)
    assert ended["input_ids"] == prompt_ids(tokenizer, [{"role": "user", "content": "hello"}])
    assert ended["completion_ids"] == ids + [tokenizer.eos_token_id]
    assert cut["completion_ids"] == ids
    assert text["completion_ids"] == tokenizer(answer["content"], add_special_tokens=False)["input_ids"] + [
        tokenizer.eos_token_id]  # a record without ids: as before


def test_token_ids_another_tokenizer_wrote_are_refused_naming_the_record(merging_tokenizer, tmp_path):
    path = tmp_path / "answers.jsonl"
    ids = merging_tokenizer.convert_tokens_to_ids(["a", "b"])
    _write_with_ids(path, [("odd", "hello", {"role": "assistant", "content": "ba", "token_ids": ids})])
    with pytest.raises(ValueError, match="record 'odd'.*do not decode to its content.*Regenerate it with this target"):
        load_completions(merging_tokenizer, path, num_prompts=1, max_prompt_tokens=64)


def test_a_record_without_an_answer_is_skipped_for_that_reason(merging_tokenizer, tmp_path, caplog):
    """A record with only its user turn is skipped with a warning of its own: it was counted with the unaligned
    ones, as one whose prompt the template renders differently (reading its answer's ``token_ids`` raised a bare
    IndexError before)."""
    path = tmp_path / "answers.jsonl"
    unanswered = {"id": "unanswered", "conversation": [{"role": "user", "content": "hello"}]}
    unaligned = {"id": "blank", "conversation": [{"role": "user", "content": "hello "},
                                                  {"role": "assistant", "content": "hi"}]}
    answered = {"id": "answered", "conversation": [{"role": "user", "content": "what"},
                                                   {"role": "assistant", "content": "a"}]}
    records = (unanswered, unaligned, answered)
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    with caplog.at_level("WARNING"):
        (record,) = load_completions(merging_tokenizer, path, num_prompts=1, max_prompt_tokens=64)
    assert merging_tokenizer.decode(record["completion_ids"]) == "a<|im_end|>"
    assert "skipped 1 record (the first: id 'unanswered') with no answer" in caplog.text
    assert "skipped 1 record (the first: id 'blank') whose prompt the chat template renders differently" in caplog.text
