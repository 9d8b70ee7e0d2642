"""The resumable progress file: a settings header, then one :class:`QuestionRecord` per line."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.drafter_identity import cached_weights_digest
from ..core.files import holding_lock, write_text_atomically
from ..core.settings import changed_settings
from ..hub import CONFIG_NAME
from .errors import BenchError
from .records import QuestionRecord

#: the settings key of the question file's digest (:func:`~hf_adaptive_spec.bench.questions.questions_digest`)
QUESTIONS_DIGEST = "questions_digest"
#: the settings key of the digests of what the run decodes with (:func:`loaded_digests`)
LOADED = "loaded"
#: the key, in :data:`LOADED`, of each method's policy digests by file (config.json, model.safetensors): what a refused
#: resume names as changed. Files written before it hold the one digest of each policy, and are refused as before.
POLICY_FILES = "policy_files"
#: the header's note of the methods whose learning across calls restarted, with the questions each had finished at
#: every resume (:meth:`ProgressLog.record_restarts`)
RESTARTED_LEARNING = "restarted_learning"
#: the header's list of the run's sessions (the first and each ``--resume``), each by the time it began (UTC); each
#: record names the session that measured it (:attr:`QuestionRecord.session`)
SESSIONS = "sessions"
#: the first entry of :data:`SESSIONS` in a file whose earlier records were written before sessions were numbered
EARLIER_SESSIONS = "earlier sessions (not numbered)"


def loaded_digests(model: Any, methods: dict[str, Any]) -> dict[str, Any]:
    """The target's weights digest and each method's :meth:`~hf_adaptive_spec.bench.methods.base.BenchMethod.
    loaded_digests` (its drafter, policy or adapter), once every method is prepared: a resumed run must load the
    same, so that a model, drafter or policy retrained at the same path is not mixed with the records before it."""
    return {"target": cached_weights_digest(model),
            "methods": {name: method.loaded_digests() for name, method in methods.items()},
            POLICY_FILES: {name: files for name, method in methods.items() if (files := method.policy_file_digests())}}


def progress_path_for(json_path: Path) -> Path:
    """``results.json`` -> ``results.progress.jsonl``."""
    return json_path.with_name(json_path.stem + ".progress.jsonl")


def writing_progress_alone(json_path: Path) -> contextlib.AbstractContextManager[None]:
    """Hold, for a run that writes the progress file of ``json_path``, the lock of its one writer, on
    ``<stem>.progress.lock`` (the progress file is replaced whole when its header changes, so a lock on it would not
    outlast the run's first record): two runs sharing one --json wrote their records into one file, under the
    header of the one that wrote it last, which --resume and --report_only then read as one run's."""
    progress = progress_path_for(json_path)
    return holding_lock(progress.with_suffix(".lock"), (
        f"{progress} is being written by another bench run with --json {json_path} (still running): both would "
        "write their records into it under one run's settings, and --resume would mix them. Wait for it to end "
        "(--resume then continues it), or pass another --json."
    ))


class ProgressLog:
    """Appends each finished (question, method) pair, so an interrupted run can resume.

    Args:
        path: the JSONL file.
        settings: what the measurements depend on (model, dtype, options ...); a resumed
            run must have the same.
        resume: keep the records already in ``path``; otherwise start the file afresh (the bench refuses that first
            where the file holds records no report holds: :func:`~.checks.check_progress_kept`).

    Raises:
        BenchError: when resuming a file written with other settings.
    """

    def __init__(self, path: Path, settings: dict[str, Any], resume: bool):
        self.path = Path(path)
        self.completed: dict[tuple[int | str, str], QuestionRecord] = {}
        self.header = settings
        if resume and self.path.is_file():
            self._load(settings)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"settings": settings}) + "\n")
        self.began = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.session: int | None = None  # numbered at its first record: a session that measures nothing is none

    def _begin_session(self) -> int:
        """Number this session (0: the run's first) and note when it began in the header. A file of records written
        before sessions were numbered gets :data:`EARLIER_SESSIONS` first: its records (session None) were measured
        in other sessions than this one."""
        sessions = list(self.header.get(SESSIONS, []))
        if not sessions and self.completed:
            sessions.append(EARLIER_SESSIONS)
        self._rewrite_header({**self.header, SESSIONS: [*sessions, self.began]})
        return len(sessions)

    @property
    def restarted_learning(self) -> dict[str, list[int]]:
        """Each method whose learning across calls restarted in a resumed session, with the questions it had
        finished at each restart (what the report, rebuilt or not, says of the run)."""
        return self.header.get(RESTARTED_LEARNING, {})

    def record_restarts(self, restarted: dict[str, int]) -> None:
        """Add this session's restarts (method -> questions finished before it) to the header's note."""
        if restarted:
            notes = {name: list(counts) for name, counts in self.restarted_learning.items()}
            for name, finished in restarted.items():
                notes.setdefault(name, []).append(finished)
            self._rewrite_header({**self.header, RESTARTED_LEARNING: notes})

    def _rewrite_header(self, header: dict[str, Any]) -> None:
        lines = self.path.read_text().splitlines(keepends=True)
        write_text_atomically(self.path, json.dumps({"settings": header}) + "\n" + "".join(lines[1:]))
        self.header = header

    def append(self, record: QuestionRecord) -> None:
        """Write one finished record (flushed at once), marked with this session."""
        if self.session is None:
            self.session = self._begin_session()
        record.session = self.session
        with self.path.open("a") as file:
            file.write(json.dumps(record.to_dict()) + "\n")
        self.completed[record.key] = record

    def _load(self, settings: dict[str, Any]) -> None:
        stored, self.completed = read_progress(self.path, repair=True)
        self.header = stored
        # Round-trip through JSON so that tuples and lists compare equal.
        current = json.loads(json.dumps(settings))
        for key in (QUESTIONS_DIGEST, LOADED):  # files written before the key: the paths are all they name
            if key not in stored:
                current.pop(key, None)
        changed = changed_settings(_measurement_settings(stored), _measurement_settings(current))
        if changed:
            raise BenchError(
                f"{self.path} was written with other settings ({'; '.join(changed)}); pass the same values, or move "
                "it away (or pass another --json) to measure afresh"
            )
        if LOADED in current:
            self._check_loaded(stored, current[LOADED])

    def _check_loaded(self, stored: dict[str, Any], loaded: dict[str, Any]) -> None:
        """Refuse weights other than those the file's records were measured with: the target's, and those of each
        method the file already names. A method new to the run adds its digests to the file's header."""
        before = stored[LOADED]
        common = before["methods"].keys() & loaded["methods"].keys()
        changed = changed_settings(
            {"target": before["target"], "methods": {name: before["methods"][name] for name in common}},
            {"target": loaded["target"], "methods": {name: loaded["methods"][name] for name in common}},
            f"{LOADED}.",
        )
        if changed:
            raise BenchError(changed_loaded_message(self.path, changed, changed_policy_files(before, loaded, common)))
        new = loaded["methods"].keys() - before["methods"].keys()
        if new:
            methods = {**loaded["methods"], **before["methods"]}
            files = {name: files for name, files in loaded.get(POLICY_FILES, {}).items() if name in new}
            files.update(before.get(POLICY_FILES, {}))
            header = {"target": before["target"], "methods": methods, **({POLICY_FILES: files} if files else {})}
            self._rewrite_header({**stored, LOADED: header})


def changed_policy_files(
    before: dict[str, Any], loaded: dict[str, Any], methods: set[str]
) -> dict[str, dict[str, bool]]:
    """Each of ``methods`` whose policy digest differs between the progress file's loaded digests (``before``) and
    the run's, with each file of its folder and whether it differs (:data:`POLICY_FILES`; a method the progress file
    holds no file digests for, written before them, is left out)."""
    changed = {}
    for name in sorted(methods):
        if before["methods"][name].get("policy") == loaded["methods"][name].get("policy"):
            continue
        stored, current = before.get(POLICY_FILES, {}).get(name), loaded.get(POLICY_FILES, {}).get(name)
        if stored is not None and current is not None:
            changed[name] = {file: stored.get(file) != current.get(file) for file in sorted(stored.keys() | current)}
    return changed


def changed_loaded_message(path: Path, changed: list[str], policy_files: dict[str, dict[str, bool]]) -> str:
    """The refusal of a resume whose target, drafters or policies differ from the progress file's (``changed``:
    each digest, ``name: stored -> new``), naming the files of each changed policy's folder that differ
    (``policy_files``, :func:`changed_policy_files`): a policy whose config.json alone changed was edited, not
    retrained."""
    listed, afresh = "; ".join(changed), "or move it away (or pass another --json) to measure afresh"
    if not policy_files:  # no policy among the changes, or a file written before the policies' file digests
        return (f"{path} was measured with other weights than this run loads ({listed}): a model, drafter or policy "
                f"was retrained or replaced at its path since the run began. Restore it, {afresh}")
    named = "; ".join(_policy_files_changed(name, files) for name, files in policy_files.items())
    edited = [[file for file, differs in files.items() if differs] for files in policy_files.values()]
    if len(policy_files) == len(changed) and all(files == [CONFIG_NAME] for files in edited):
        return (f"{path} was measured with other policy settings than this run loads: {named} ({listed}). Only "
                f"{CONFIG_NAME} was edited since the run began, no weights (no policy was retrained); a policy drafts "
                f"by its settings too, so the records before are not mixed with this run's. Restore the "
                f"{CONFIG_NAME} the run began with, {afresh}")
    return (f"{path} was measured with other weights or settings than this run loads: {named} ({listed}). A model, "
            f"drafter or policy was retrained, edited or replaced at its path since the run began. Restore it, "
            f"{afresh}")


def _policy_files_changed(method: str, files: dict[str, bool]) -> str:
    """``"x's policy changed in config.json, not in model.safetensors"``."""
    differ = " and ".join(file for file, differs in files.items() if differs)
    same = " and ".join(file for file, differs in files.items() if not differs)
    return f"{method}'s policy changed in {differ}" + (f", not in {same}" if same else "")


def _measurement_settings(header: dict[str, Any]) -> dict[str, Any]:
    """The header's settings a resumed run must match exactly (the loaded weights are compared per method, and the
    restarts and the sessions are notes of the run's history)."""
    return {key: value for key, value in header.items() if key not in (LOADED, RESTARTED_LEARNING, SESSIONS)}


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
            f"{path} is not a bench progress file (its first line should hold the run's settings): give the "
            "<stem>.progress.jsonl a bench run wrote beside its --json report; where a run would write its progress "
            "here, move this file away or pass another --json"
        ) from None
    completed: dict[tuple[int | str, str], QuestionRecord] = {}
    for number, line in enumerate(lines[1:], 2):
        try:
            record = QuestionRecord.from_dict(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):  # a line cut short by an interrupted write
                if repair:
                    write_text_atomically(path, "".join(line + "\n" for line in lines[:-1]))
                break
            raise BenchError(f"{path}:{number}: corrupt record") from None
        except BenchError as error:
            raise BenchError(f"{path}:{number}: {error}") from None
        completed[record.key] = record
    return settings, completed
