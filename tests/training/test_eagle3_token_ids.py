"""EAGLE-3 (and PPOW, which reads the same samples) trains a regenerated answer on the ids the target generated.

Decoding an answer and re-encoding its text need not give its ids back: byte-level BPE vocabularies hold ``ĊĊ``
(two newlines) beside ``Ċ``, and the target may write either. The tokenizer here merges two newlines into one token
whenever it encodes text, so an answer generated as two single newlines re-encodes otherwise.
"""

from __future__ import annotations

import json

import pytest
from tiny_models import newline_merging_tokenizer
from transformers import PreTrainedTokenizerFast

from hf_adaptive_spec.training.eagle3 import load_samples, tokenize_conversation
from hf_adaptive_spec.training_data.regenerate import prompt_ids

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    """Characters, plus one merge: two newlines are one token."""
    return newline_merging_tokenizer(list("abcdefghijklmnopqrstuvwxyz ,.?:1\n"), CHATML)


def _generated(tokenizer, pieces: list[str]) -> list[int]:
    """The ids of ``pieces``, one token each: what the target generated."""
    return tokenizer.convert_tokens_to_ids(pieces)


def _answer(tokenizer, pieces: list[str], **extra) -> dict:
    ids = _generated(tokenizer, pieces)
    return {"role": "assistant", "content": tokenizer.decode(ids, skip_special_tokens=True), "token_ids": ids, **extra}


def _trained(sample: dict) -> list[int]:
    return [token for token, mask in zip(sample["input_ids"], sample["loss_mask"]) if mask]


def test_the_last_answer_is_trained_on_its_ids_not_on_its_text_re_encoded(tokenizer):
    ids = _generated(tokenizer, ["l", "i", "s", "t", ":", "\n", "\n", "1"])
    answer = _answer(tokenizer, ["l", "i", "s", "t", ":", "\n", "\n", "1"])
    assert tokenizer(answer["content"], add_special_tokens=False)["input_ids"] != ids  # the case this is about
    user = {"role": "user", "content": "hi"}
    end = tokenizer.convert_tokens_to_ids(["<|im_end|>", "\n"])

    sample = tokenize_conversation(tokenizer, [user, answer], max_length=100)
    header = prompt_ids(tokenizer, [user])  # the prompt the target answered
    assert sample["input_ids"] == header + ids + end
    assert sample["loss_mask"] == [0] * len(header) + [1] * (len(ids) + len(end))

    text_only = {key: answer[key] for key in ("role", "content")}  # a record of a file written before the ids
    before = tokenize_conversation(tokenizer, [user, text_only], max_length=100)
    assert before["input_ids"] == tokenizer.apply_chat_template([user, text_only], tokenize=True, return_dict=False)
    assert _trained(before) != ids + end and tokenizer.decode(_trained(before)) == tokenizer.decode(ids + end)


def test_a_cut_answer_is_its_ids_without_an_end(tokenizer):
    user = {"role": "user", "content": "hi"}
    answer = _answer(tokenizer, ["a", "\n", "\n", "b"], truncated=True)
    sample = tokenize_conversation(tokenizer, [user, answer], max_length=100)
    assert sample["input_ids"] == prompt_ids(tokenizer, [user]) + answer["token_ids"]
    assert _trained(sample) == answer["token_ids"]


def test_earlier_answers_are_their_text_as_the_target_saw_them_later(tokenizer):
    first, last = _answer(tokenizer, ["a", "\n", "\n", "b"]), _answer(tokenizer, ["c", "\n", "\n", "d"])
    messages = [{"role": "user", "content": "hi"}, first, {"role": "user", "content": "more"}, last,
                {"role": "user", "content": "unanswered"}]  # nothing to train after the last answer: left out
    sample = tokenize_conversation(tokenizer, messages, max_length=100)
    header = prompt_ids(tokenizer, messages[:3])  # the first answer rendered from its text, merge included
    end = tokenizer.convert_tokens_to_ids(["<|im_end|>", "\n"])
    assert sample["input_ids"] == header + last["token_ids"] + end
    first_as_text = [messages[0], {"role": "assistant", "content": first["content"]}]
    text_first = tokenize_conversation(tokenizer, first_as_text, max_length=100)
    assert _trained(sample) == _trained(text_first) + last["token_ids"] + end


def test_ids_that_do_not_decode_to_the_answer_are_refused(tokenizer, tmp_path):
    answer = {**_answer(tokenizer, ["a", "b"]), "content": "ba"}  # as if another tokenizer had written the ids
    with pytest.raises(ValueError, match="'ba' has token_ids that do not decode.*another tokenizer.*drop the"):
        tokenize_conversation(tokenizer, [{"role": "user", "content": "hi"}, answer], max_length=100)


def test_samples_read_from_a_file_keep_the_ids(tokenizer, tmp_path):
    path = tmp_path / "regenerated.jsonl"
    answer = _answer(tokenizer, ["o", "k", "\n", "\n", "1"])
    path.write_text(json.dumps({"id": "r", "conversation": [{"role": "user", "content": "hi"}, answer]}) + "\n")
    (sample,) = load_samples(tokenizer, path, max_length=100)
    assert _trained(sample)[: len(answer["token_ids"])] == answer["token_ids"]


@pytest.mark.slow
def test_smollm2_ids_with_a_double_newline_token_are_kept():
    """The measured case: SmolLM2 writes ``ĊĊ`` then ``1``; the text re-encodes as ``Ċ``, ``Ċ``, ``1``."""
    import hf_adaptive_spec as hfas
    from hf_adaptive_spec.training.dvi.data import completion_ids

    _, smollm2 = hfas.load_default_model()
    ids = smollm2("Lists:", add_special_tokens=False)["input_ids"] + smollm2.convert_tokens_to_ids(["ĊĊ", "1"])
    answer = {"role": "assistant", "content": smollm2.decode(ids, skip_special_tokens=True), "token_ids": ids}
    assert smollm2(answer["content"], add_special_tokens=False)["input_ids"] != ids
    user = {"role": "user", "content": "Give me a list."}
    sample = tokenize_conversation(smollm2, [user, answer], max_length=512)
    header = prompt_ids(smollm2, [user])
    assert sample["input_ids"][len(header) : len(header) + len(ids)] == ids
    assert completion_ids(smollm2, [user, answer], header) == ids + [smollm2.eos_token_id]
