"""Question files: the packaged MT-bench set, category filter, limit, malformed input."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hf_adaptive_spec.bench.arguments import DEFAULT_QUESTIONS
from hf_adaptive_spec.bench.errors import BenchError
from hf_adaptive_spec.bench.questions import load_questions


def test_packaged_mt_bench_has_80_two_turn_questions():
    questions = load_questions(DEFAULT_QUESTIONS)
    assert len(questions) == 80
    assert all(len(question.turns) == 2 for question in questions)
    assert set(Counter(question.category for question in questions).values()) == {10}
    assert (DEFAULT_QUESTIONS.parent / "LICENSE.fastchat").is_file()


def test_category_filter_then_limit_keeps_file_order(questions_file: Path):
    writing = load_questions(questions_file, categories=["writing"])
    assert [question.question_id for question in writing] == [1, 3]
    assert [question.question_id for question in load_questions(questions_file, ["writing"], limit=1)] == [1]
    assert [question.question_id for question in load_questions(questions_file, limit=2)] == [1, 2]
    assert load_questions(questions_file)[1].turns == ("What is 2+2?", "And 3+3?")


def test_per_category_keeps_the_first_of_each_category_in_file_order(questions_file: Path):
    assert [question.question_id for question in load_questions(questions_file, per_category=1)] == [1, 2]
    assert [question.question_id for question in load_questions(questions_file, per_category=1, limit=1)] == [1]
    assert [question.question_id for question in load_questions(questions_file, per_category=5)] == [1, 2, 3]


def test_unknown_category_lists_available(questions_file: Path):
    with pytest.raises(BenchError, match="math, writing"):
        load_questions(questions_file, categories=["poetry"])


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"question_id": 1, "category": "a", "turns": ["x"]}'] * 2, "duplicate question ids 1"),
        (['{"question_id": 1, "category": "a"}'], "not a question record"),
        (['{"question_id": 1, "category": "a", "turns": []}'], "non-empty list"),
        (["not json"], "not a question record"),
        # an id records cannot be keyed on failed raw (unhashable type: 'list') once the model had loaded
        (['{"question_id": [1], "category": "a", "turns": ["x"]}'], r"'question_id' must be .*, got \[1\]"),
        (['{"question_id": true, "category": "a", "turns": ["x"]}'], "'question_id' must be an int or a string"),
    ],
)
def test_malformed_files_are_rejected(tmp_path: Path, lines: list[str], message: str):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BenchError, match=message):
        load_questions(path)


def test_missing_file_is_a_bench_error(tmp_path: Path):
    with pytest.raises(BenchError, match="not found"):
        load_questions(tmp_path / "absent.jsonl")
