"""The Spec-Bench loop: multi-turn prompts from stock's answers, identity check, warm-up, order."""

from __future__ import annotations

from pathlib import Path

from hf_adaptive_spec.bench.conversation import turn_prompt_ids
from hf_adaptive_spec.bench.questions import load_questions
from hf_adaptive_spec.bench.runner import run_benchmark

from .bench_fakes import FakeStats, ScriptedMethod


def test_turn_prompts_follow_the_chat_template(bench_model):
    _, tokenizer = bench_model
    answer = tokenizer.encode(" Roses are red. ")
    first = turn_prompt_ids(tokenizer, ["Write a poem.", "Shorter."], [])
    second = turn_prompt_ids(tokenizer, ["Write a poem.", "Shorter."], [answer])
    assert first.shape[0] == 1
    assert tokenizer.decode(first[0]) == "<|im_start|>user\nWrite a poem.<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.decode(second[0]) == (
        "<|im_start|>user\nWrite a poem.<|im_end|>\n<|im_start|>assistant\nRoses are red.<|im_end|>\n"
        "<|im_start|>user\nShorter.<|im_end|>\n<|im_start|>assistant\n"
    )


def _methods(tokenizer, calls):
    return {
        "stock": ScriptedMethod("stock", tokenizer.encode("STOCK ANSWER"), calls),
        "same": ScriptedMethod("same", tokenizer.encode("STOCK ANSWER"), calls, FakeStats()),
        "other": ScriptedMethod("other", tokenizer.encode("OTHER ANSWER"), calls),
    }


def test_every_method_sees_stocks_answer_in_turn_two(bench_model, questions_file: Path):
    model, tokenizer = bench_model
    calls = []
    questions = load_questions(questions_file, limit=1)
    records = run_benchmark(model, tokenizer, questions, _methods(tokenizer, calls))
    second_prompts = {label: tokenizer.decode(prompt) for label, prompt in calls[1::2]}
    assert set(second_prompts) == {"stock", "same", "other"}
    for prompt in second_prompts.values():
        assert "assistant\nSTOCK ANSWER<|im_end|>\n<|im_start|>user\nMake it shorter." in prompt
        assert "OTHER" not in prompt
    by_method = {record.method: record for record in records}
    assert [turn.identical for turn in by_method["same"].turns] == [True, True]
    assert [turn.identical for turn in by_method["other"].turns] == [False, False]
    assert by_method["other"].turns[0].first_mismatch == 0
    assert by_method["stock"].turns[0].output_ids == tokenizer.encode("STOCK ANSWER")
    assert by_method["other"].turns[0].output_ids is None
    assert by_method["same"].turns[1].accepted_lengths == [2, 0, 3]
    assert by_method["same"].turns[1].draft_time == FakeStats().draft_time
    assert by_method["same"].turns[1].verify_times == FakeStats().verify_times


def test_methods_are_interleaved_per_question_after_warmup(bench_model, questions_file: Path):
    model, tokenizer = bench_model
    calls = []
    questions = load_questions(questions_file)
    records = run_benchmark(model, tokenizer, questions, _methods(tokenizer, calls), warmup=2)
    first_prompt = turn_prompt_ids(tokenizer, questions[0].turns, [])[0].tolist()
    warmup_calls, timed_calls = calls[:6], calls[6:]
    assert [label for label, _ in warmup_calls] == ["stock", "stock", "same", "same", "other", "other"]
    assert all(prompt == first_prompt for _, prompt in warmup_calls)
    # stock first on every question; the others' order rotates per question (no fixed position after stock)
    first, second = ["stock"] * 2 + ["same"] * 2 + ["other"] * 2, ["stock"] * 2 + ["other"] * 2 + ["same"] * 2
    assert [label for label, _ in timed_calls] == first + second + ["stock", "same", "other"]
    assert [(record.question_id, record.method) for record in records][:3] == [(1, "stock"), (1, "same"), (1, "other")]
    assert all(turn.wall_time > 0 for record in records for turn in record.turns)


def test_first_mismatch_counts_a_shorter_output(bench_model, questions_file: Path):
    model, tokenizer = bench_model
    calls = []
    methods = {
        "stock": ScriptedMethod("stock", [10, 11, 12], calls),
        "short": ScriptedMethod("short", [10, 11], calls),
    }
    records = run_benchmark(model, tokenizer, load_questions(questions_file, limit=1), methods)
    assert records[1].turns[0].identical is False
    assert records[1].turns[0].first_mismatch == 2
