"""Spec-Bench / MT-bench question files: ``{"question_id", "category", "turns": [...]}`` per line."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .errors import BenchError


@dataclass(frozen=True)
class Question:
    """One benchmark prompt: one or more user turns of a conversation."""

    question_id: int | str
    category: str
    turns: tuple[str, ...]


def questions_digest(questions: list[Question]) -> str:
    """A digest of the questions' ids, categories and turns: a resumed run must ask what its records answered (the
    file's path alone does not say it still holds the same questions)."""
    text = json.dumps([[str(q.question_id), q.category, list(q.turns)] for q in questions], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_questions(
    path: Path, categories: list[str] | None = None, limit: int | None = None, per_category: int | None = None
) -> list[Question]:
    """Read a JSONL question file, keep ``categories`` (all when None), the first ``per_category``
    of each category, then the first ``limit``.

    Raises:
        BenchError: missing file, malformed record, duplicate id, or nothing left to run.
    """
    path = Path(path)
    if not path.is_file():
        raise BenchError(f"question file not found: {path}")
    questions = [
        _parse(line, path, number) for number, line in enumerate(path.read_text().splitlines(), 1) if line.strip()
    ]
    ids = [question.question_id for question in questions]
    duplicates = sorted({str(qid) for qid in ids if ids.count(qid) > 1})
    if duplicates:
        raise BenchError(f"{path}: duplicate question ids {', '.join(duplicates)}")
    if categories is not None:
        available = sorted({question.category for question in questions})
        unknown = [name for name in categories if name not in available]
        if unknown:
            raise BenchError(f"unknown categories {', '.join(unknown)}; {path} has: {', '.join(available)}")
        questions = [question for question in questions if question.category in categories]
    if per_category is not None:
        seen: dict[str, int] = {}
        kept = []
        for question in questions:
            seen[question.category] = seen.get(question.category, 0) + 1
            if seen[question.category] <= per_category:
                kept.append(question)
        questions = kept
    if limit is not None:
        questions = questions[:limit]
    if not questions:
        raise BenchError(f"no questions to run from {path}")
    return questions


def _parse(line: str, path: Path, number: int) -> Question:
    try:
        record = json.loads(line)
        if isinstance(record, dict) and "turns" in record and not isinstance(record["turns"], list):
            kind = type(record["turns"]).__name__
            raise BenchError(f"{path}:{number}: 'turns' must be a non-empty list of strings, got a {kind}")
        turns = tuple(record["turns"])
        question = Question(record["question_id"], str(record.get("category", "")), turns)
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise BenchError(f"{path}:{number}: not a question record ({error})") from error
    if isinstance(question.question_id, bool) or not isinstance(question.question_id, int | str):
        raise BenchError(f"{path}:{number}: 'question_id' must be an int or a string (what records and the progress "
                         f"file are keyed on), got {question.question_id!r}")
    if not turns or not all(isinstance(turn, str) for turn in turns):
        raise BenchError(f"{path}:{number}: 'turns' must be a non-empty list of strings")
    return question
