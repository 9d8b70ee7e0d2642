"""An append-only JSONL file of ``{"id": ...}`` records that a restarted job can resume, and its
conversation records read back."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..core.files import holding_lock
from .sharegpt import Conversation, text_id

logger = logging.getLogger(__name__)


def drop_partial_last_line(path: Path) -> None:
    """End the file's last line with a newline, so appends stay valid: a last line without one that holds a whole
    JSON record (another tool or an editor wrote the file) is kept and given its newline; one that does not parse (a
    write interrupted by a crash) is cut, and the cut is logged with the file's name."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        complete = isinstance(json.loads(data[start:]), dict)
    except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
        complete = False
    with open(path, "r+b") as handle:
        if complete:
            handle.seek(len(data))
            handle.write(b"\n")
        else:
            handle.truncate(start)
    if not complete:
        logger.warning(
            "%s: its last line (%d bytes, line %d) was cut: it is not a whole JSON record (a write interrupted by a "
            "crash); its conversation is written again.", path, len(data) - start, data.count(b"\n") + 1,
        )


def read_records(path: str | Path, skip_cut_last_line: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for every non-blank line of the JSONL file ``path``; with ``skip_cut_last_line``, a
    last line without its newline that does not parse is left out (a write a crash cut, which
    :func:`drop_partial_last_line` removes before the next append).

    Raises:
        ValueError: naming the file and line, for a line that is not a JSON object (the file a JSON array, or not
            JSON: each line of a JSONL file holds one record).
    """
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                if skip_cut_last_line and not line.endswith("\n"):  # only the last line can lack it
                    return
                record, problem = None, f"not JSON ({error})"
            else:
                problem = None if isinstance(record, dict) else f"a JSON {type(record).__name__}, not an object"
            if problem:
                array = " (the file looks like a JSON array: convert it to one record per line)" if (
                    line.lstrip().startswith("[")) else ""
                raise ValueError(
                    f"{path}:{number}: {problem}{array}. A JSONL file holds one JSON object per line, "
                    '{"id": ..., "conversation": [...]} as trainers/regenerate_sharegpt.py writes: fix or remove the '
                    "line, or pass the right file."
                )
            yield number, record


def record_id(path: str | Path, number: int, record: dict[str, Any]) -> str:
    """The ``id`` of the record on line ``number`` of ``path``, as text.

    Raises:
        ValueError: naming the file and line, for a record without a text or integer id.
    """
    value = record.get("id")
    if text_id(value) is None:
        raise ValueError(
            f"{path}:{number}: the record has {'no id' if value is None else f'the id {value!r}'}: each record needs "
            'a text (or integer) "id" naming its conversation. Give it one, or remove the line.'
        )
    return text_id(value)


def written_ids(path: Path, skip_cut_last_line: bool = False) -> set[str]:
    """The ``id`` of every record already in ``path`` (empty when the file does not exist); ``skip_cut_last_line``:
    :func:`read_records`'.

    Raises:
        ValueError: naming the file and line, for a line that is not a record with an id (:func:`read_records`).
    """
    if not Path(path).is_file():
        return set()
    return {record_id(path, number, record) for number, record in read_records(path, skip_cut_last_line)}


def writing_alone(path: Path, held_elsewhere: str | None = None) -> contextlib.AbstractContextManager[None]:
    """Hold the lock of the one process that writes ``path``
    (:func:`~hf_adaptive_spec.core.files.holding_lock`): two regenerations of one file at once each wrote every
    conversation the other was writing, and each record came twice. A file the lock made and nothing filled is
    removed: a run refused before writing leaves none. ``held_elsewhere``: the refusal, when the writer is no
    regeneration (the regeneration's by default)."""
    return holding_lock(path, held_elsewhere or (
        f"{path} is being written by another process (a regeneration of it still running): both would write every "
        "conversation neither had written, each record twice. Wait for it to end (a later run resumes where it "
        "stopped), or pass another output file."
    ))


def append_records(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Append ``records`` as JSON lines and flush them to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
        handle.flush()
        os.fsync(handle.fileno())


def read_conversation_records(path: str | Path) -> Iterator[Conversation]:
    """The ``{"id", "conversation": [{"role", "content"}, ...]}`` records of a JSONL file (what
    ``trainers/regenerate_sharegpt.py`` writes), in file order; a record without an id gets its line number.

    Raises:
        ValueError: naming the file and line, for a line that is not such a record (:func:`conversation_problem`).
    """
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number + 1}: not JSON ({error}).") from None
                problem = conversation_problem(record)
                if problem:
                    raise ValueError(
                        f"{path}:{number + 1}: {problem}. Each line must be a record {{\"id\": ..., \"conversation\": "
                        "[{\"role\": \"user\", \"content\": ...}, {\"role\": \"assistant\", ...}, ...]}, as "
                        "trainers/regenerate_sharegpt.py writes (ShareGPT's own file: pass it where a --sharegpt-file "
                        "is read)."
                    )
                yield Conversation(id=str(record.get("id", number)), messages=record["conversation"])


def conversation_problem(record: object) -> str | None:
    """What keeps ``record`` from being a conversation record, or None: its turns must be ``{"role", "content"}``
    objects with a text content, in the roles system, user and assistant, and the first turn after any system
    turns must be the user's (an answer nothing asked for has no prompt to train or record)."""
    conversation = record.get("conversation") if isinstance(record, dict) else None
    if not isinstance(conversation, list) or not conversation:
        return "no 'conversation' list of turns"
    for index, turn in enumerate(conversation):
        if not isinstance(turn, dict) or not isinstance(turn.get("content"), str):
            return f"turn {index} is not an object with a text 'content' (ShareGPT's 'from'/'value' turns?)"
        if turn.get("role") not in CONVERSATION_ROLES:
            return f"turn {index} has role {turn.get('role')!r}, not one of {list(CONVERSATION_ROLES)}"
    first = next((turn["role"] for turn in conversation if turn["role"] != "system"), None)
    if first != "user":
        return f"the first turn after the system turns is {first or 'missing'}, not the user's"
    return None


#: the roles a conversation record's turns may have
CONVERSATION_ROLES = ("system", "user", "assistant")
