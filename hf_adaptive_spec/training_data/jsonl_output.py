"""An append-only JSONL file of ``{"id": ...}`` records that a restarted job can resume, and its
conversation records read back."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .sharegpt import Conversation


def drop_partial_last_line(path: Path) -> None:
    """Cut a last line without its newline (a write interrupted by a crash), so appends stay valid."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def written_ids(path: Path) -> set[str]:
    """The ``id`` of every record already in ``path`` (empty when the file does not exist)."""
    if not path.is_file():
        return set()
    with open(path, encoding="utf-8") as lines:
        return {json.loads(line)["id"] for line in lines if line.strip()}


def append_records(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Append ``records`` as JSON lines and flush them to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
        handle.flush()
        os.fsync(handle.fileno())


def read_conversation_records(path: str | Path) -> Iterator[Conversation]:
    """The ``{"id", "conversation": [{"role", "content"}, ...]}`` records of a JSONL file (what
    ``trainers/regenerate_sharegpt.py`` writes), in file order; a record without an id gets its line number."""
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if line.strip():
                record = json.loads(line)
                yield Conversation(id=str(record.get("id", number)), messages=record["conversation"])
