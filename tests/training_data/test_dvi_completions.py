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
