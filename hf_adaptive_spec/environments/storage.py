"""Recordings on disk: one ``recording.json`` folder, or the ``shard-START-END`` folders that
``hf-adaptive-spec record`` writes (with the settings every shard shares in ``record_args.json``)."""

from __future__ import annotations

import itertools
import json
import logging
import re
from pathlib import Path

from .recorded import ReplayRecording, damaged_recording

logger = logging.getLogger(__name__)

SHARD_NAME = re.compile(r"shard-(\d+)-(\d+)")
MANIFEST = "record_args.json"


def finished_shards(directory: Path) -> list[tuple[int, int, Path]]:
    """``(start, end, folder)`` of each complete shard in ``directory``, by start; raises on overlaps, and on a shard
    folder without its ``recording.json`` (``record`` renames a shard complete, so it lost the file since): loaded,
    its prompts would be left out without a word, and a rerun could not write the shard over it."""
    shards = [(match, path) for path in (directory.iterdir() if directory.is_dir() else [])
              if (match := SHARD_NAME.fullmatch(path.name))]
    for _, path in shards:
        if not (path / "recording.json").is_file():
            raise damaged_recording(path, "recording.json is missing")
    found = sorted((int(match[1]), int(match[2]), path) for match, path in shards)
    for (_, end, first), (start, _, second) in itertools.pairwise(found):
        if start < end:
            raise ValueError(f"Shards {first.name} and {second.name} overlap: delete one of them (in {directory}).")
    return found


def load_recording(path: str | Path) -> ReplayRecording:
    """A recording folder, or a folder of ``hf-adaptive-spec record`` shards concatenated in prompt order."""
    path = Path(path)
    if (path / "recording.json").is_file():
        return ReplayRecording.load(path)
    shards = finished_shards(path)
    if not shards:
        raise FileNotFoundError(
            f"No recording in {path}: expected recording.json or shard-START-END folders from "
            "`hf-adaptive-spec record`."
        )
    warn_of_missing_shards(path, shards)
    return ReplayRecording.concatenate([ReplayRecording.load(folder) for _, _, folder in shards])


def warn_of_missing_shards(directory: Path, shards: list[tuple[int, int, Path]]) -> None:
    """Warn of the prompts no shard between two finished ones holds (a shard deleted and not recorded again, a later
    ``--start`` recorded first): the recording loaded skips them, so its prompt ``i`` is not the record order's, and
    recordings of other ``top_k`` no longer line up with it prompt by prompt."""
    for (_, end, first), (start, _, second) in itertools.pairwise(shards):
        if end < start:
            logger.warning(
                "%s holds no shard for prompts %d to %d (between %s and %s): the recording skips them. Record them "
                "with `hf-adaptive-spec record --output %s --start %d --num-prompts %d` and the same options.",
                directory, end, start - 1, first.name, second.name, directory, end, start - end,
            )


def recording_manifest(path: str | Path) -> dict | None:
    """The ``record`` settings of a folder of shards or of one of its shards (what model, drafter and
    prompts); None for a recording saved without them (``ReplayRecording.save``)."""
    path = Path(path)
    manifests = [path / MANIFEST] + ([path.parent / MANIFEST] if (path / "recording.json").is_file() else [])
    found = next((manifest for manifest in manifests if manifest.is_file()), None)
    return None if found is None else read_manifest(found)


def read_manifest(path: Path) -> dict:
    """The settings ``record`` wrote to ``path`` (a ``record_args.json``), refused naming the file when it is no
    JSON object (cut short or edited by hand): its shards' model, drafter and prompts would be unknown."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        manifest = error
    if not isinstance(manifest, dict):
        what = manifest if isinstance(manifest, ValueError) else f"a JSON {type(manifest).__name__}, not an object"
        raise ValueError(
            f"{path} is damaged ({what}): it names the settings of the shards beside it. Restore it from a copy, or "
            "record into a new --output (`hf-adaptive-spec record` writes it)."
        )
    return manifest


def load_training_recording(path: str | Path) -> ReplayRecording:
    """:func:`load_recording`, refusing a recording of benchmark questions (``record --questions``) or its shards."""
    questions = (recording_manifest(path) or {}).get("questions")
    if questions:
        raise ValueError(
            f"{path} records the benchmark questions of {questions}: policies must not train on evaluation prompts. "
            "Record training prompts (--prompts or --prompts-file) for training, and use this recording to evaluate "
            "(e.g. LTD's eval_recording_dir, examples/replay_*.py)."
        )
    return load_recording(path)
