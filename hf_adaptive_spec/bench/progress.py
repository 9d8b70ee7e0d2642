"""The resumable progress file: a settings header, then one :class:`QuestionRecord` per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.settings import changed_settings
from .errors import BenchError
from .records import QuestionRecord

#: the settings key of the question file's digest (:func:`~hf_adaptive_spec.bench.questions.questions_digest`)
QUESTIONS_DIGEST = "questions_digest"


def progress_path_for(json_path: Path) -> Path:
    """``results.json`` -> ``results.progress.jsonl``."""
    return json_path.with_name(json_path.stem + ".progress.jsonl")


class ProgressLog:
    """Appends each finished (question, method) pair, so an interrupted run can resume.

    Args:
        path: the JSONL file.
        settings: what the measurements depend on (model, dtype, options ...); a resumed
            run must have the same.
        resume: keep the records already in ``path``; otherwise start the file afresh.

    Raises:
        BenchError: when resuming a file written with other settings.
    """

    def __init__(self, path: Path, settings: dict[str, Any], resume: bool):
        self.path = Path(path)
        self.completed: dict[tuple[int | str, str], QuestionRecord] = {}
        if resume and self.path.is_file():
            self._load(settings)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"settings": settings}) + "\n")

    def append(self, record: QuestionRecord) -> None:
        """Write one finished record (flushed at once)."""
        with self.path.open("a") as file:
            file.write(json.dumps(record.to_dict()) + "\n")
        self.completed[record.key] = record

    def _load(self, settings: dict[str, Any]) -> None:
        stored, self.completed = read_progress(self.path, repair=True)
        # Round-trip through JSON so that tuples and lists compare equal.
        current = json.loads(json.dumps(settings))
        if QUESTIONS_DIGEST not in stored:  # written before questions were digested: the path is all it names
            current.pop(QUESTIONS_DIGEST, None)
        changed = changed_settings(stored, current)
        if changed:
            raise BenchError(
                f"{self.path} was written with other settings ({'; '.join(changed)}); pass the same values, delete "
                "it, or run without --resume"
            )


def read_progress(
    path: Path, repair: bool = False
) -> tuple[dict[str, Any], dict[tuple[int | str, str], QuestionRecord]]:
    """The settings a progress file was written with and its finished records by (question id, method).

    A last line cut short by an interrupted write is left out (and removed from the file with ``repair``).

    Raises:
        BenchError: when ``path`` is not a progress file or a record before the last line is corrupt.
    """
    path = Path(path)
    lines = path.read_text().splitlines()
    try:
        settings = json.loads(lines[0])["settings"]
    except (IndexError, json.JSONDecodeError, KeyError, TypeError):
        raise BenchError(
            f"{path} is not a bench progress file (its first line should hold the run's settings); "
            "delete it, or point --json at the report whose progress file it is"
        ) from None
    completed: dict[tuple[int | str, str], QuestionRecord] = {}
    for number, line in enumerate(lines[1:], 2):
        try:
            record = QuestionRecord.from_dict(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):  # a line cut short by an interrupted write
                if repair:
                    path.write_text("".join(line + "\n" for line in lines[:-1]))
                break
            raise BenchError(f"{path}:{number}: corrupt record") from None
        completed[record.key] = record
    return settings, completed
