"""DVI's replay data: first user turn + the assistant's answer through end-of-turn, from target-answered JSONL."""

from __future__ import annotations

import json

import pytest

from hf_adaptive_spec.training.dvi.data import load_completions
from hf_adaptive_spec.training_data.regenerate import prompt_ids


def _write(path, conversations):
    with open(path, "w", encoding="utf-8") as handle:
        for index, (question, answer) in enumerate(conversations):
            turns = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            handle.write(json.dumps({"id": str(index), "conversation": turns}) + "\n")


def test_records_hold_the_prompt_and_the_answer_through_end_of_turn(tmp_path, tiny_tokenizer):
    path = tmp_path / "answers.jsonl"
    long_question = " ".join(["tell me more"] * 20)
    _write(path, [("hello world", "how are you"), (long_question, "the cat"), ("what is two plus one", "one")])
    records = load_completions(tiny_tokenizer, path, num_prompts=2, max_prompt_tokens=12)
    user = [{"role": "user", "content": "hello world"}]
    assert records[0]["input_ids"] == prompt_ids(tiny_tokenizer, user)
    completion = records[0]["completion_ids"]
    assert completion[-1] == tiny_tokenizer.eos_token_id and tiny_tokenizer.decode(completion[:-1]) == "how are you"
    assert tiny_tokenizer.decode(records[1]["completion_ids"][:-1]) == "one"  # the over-long prompt was skipped

    with pytest.raises(ValueError, match="regenerate_sharegpt"):
        load_completions(tiny_tokenizer, path, num_prompts=3, max_prompt_tokens=12)
    with pytest.raises(ValueError, match="completions_path"):
        load_completions(tiny_tokenizer, None, num_prompts=1, max_prompt_tokens=12)


def test_a_cut_answer_has_no_end_and_an_evaluation_question_is_skipped(tmp_path, tiny_tokenizer):
    from hf_adaptive_spec.training_data.leakage import question_digest

    path = tmp_path / "answers.jsonl"
    _write(path, [("what is two plus one", "one"), ("hello world", "how are you")])
    with open(path, "a", encoding="utf-8") as handle:  # an answer max_new_tokens cut: the target went on
        turns = [{"role": "user", "content": "tell me more"},
                 {"role": "assistant", "content": "the cat", "truncated": True}]
        handle.write(json.dumps({"id": "cut", "conversation": turns}) + "\n")
    records = load_completions(tiny_tokenizer, path, num_prompts=2, max_prompt_tokens=12,
                               digests=frozenset({question_digest("What is two plus one?")}))
    assert tiny_tokenizer.decode(records[0]["completion_ids"][:-1]) == "how are you"  # the evaluation question: skipped
    assert tiny_tokenizer.eos_token_id not in records[1]["completion_ids"]
    assert tiny_tokenizer.decode(records[1]["completion_ids"]).strip() == "the cat"


@pytest.mark.parametrize("line, problem", [
    ('{"conversation": [{"role": "user", "content": "hi"}', "not JSON"),
    ('{"text": "hello"}', "no 'conversation' list of turns"),
    ('{"conversation": "hello"}', "no 'conversation' list of turns"),
    ('{"conversation": [{"from": "human", "value": "hi"}]}', "turn 0 is not an object with a text 'content'"),
    ('{"conversation": [{"role": "user", "content": null}]}', "turn 0 is not an object with a text 'content'"),
    ('{"conversation": [{"role": "human", "content": "hi"}]}', "turn 0 has role 'human'"),
    ('{"conversation": [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "a"}]}',
     "the first turn after the system turns is assistant, not the user's"),
    ('{"conversation": [{"role": "system", "content": "be brief"}]}', "is missing, not the user's"),
])
def test_a_line_that_is_no_conversation_record_is_refused_naming_the_file_and_line(tmp_path, tiny_tokenizer, line,
                                                                                   problem):
    """Bare KeyErrors, TypeErrors, a JSONDecodeError naming no file, or transformers' 'empty conversation' before."""
    from hf_adaptive_spec.training.eagle3.data import load_samples
    from hf_adaptive_spec.training_data import read_conversation_records

    path = tmp_path / "answers.jsonl"
    good = {"id": "0", "conversation": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "one"}]}
    path.write_text(json.dumps(good) + "\n" + line + "\n")
    for read in (lambda: list(read_conversation_records(path)), lambda: load_samples(tiny_tokenizer, path, 64),
                 lambda: load_completions(tiny_tokenizer, path, num_prompts=2, max_prompt_tokens=64)):
        with pytest.raises(ValueError, match=rf"answers.jsonl:2: .*{problem}"):
            read()


def test_system_turns_before_the_first_user_turn_belong_to_the_prompt(tmp_path, tiny_tokenizer):
    """The prompt was messages[:1], the system turn alone, and the answer messages[1], the user turn."""
    path = tmp_path / "answers.jsonl"
    turns = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"},
             {"role": "assistant", "content": "how are you"}]
    path.write_text(json.dumps({"id": "s", "conversation": turns}) + "\n")
    record, = load_completions(tiny_tokenizer, path, num_prompts=1, max_prompt_tokens=64)
    assert record["input_ids"] == prompt_ids(tiny_tokenizer, turns[:2])
    assert tiny_tokenizer.decode(record["completion_ids"][:-1]) == "how are you"


def test_eagle3_data_with_nothing_to_train_is_refused_before_the_trainer(tmp_path, tiny_tokenizer):
    """A file of unanswered conversations failed inside torch's sampler ('num_samples=0') after the target loaded."""
    from hf_adaptive_spec.training.eagle3.data import load_samples

    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({"conversation": [{"role": "user", "content": "hello"}]}) + "\n")
    with pytest.raises(ValueError, match="none of its 1 conversations read holds an assistant answer to train on"):
        load_samples(tiny_tokenizer, path, 64)
