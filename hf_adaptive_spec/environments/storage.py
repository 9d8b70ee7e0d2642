"""Recordings on disk: one ``recording.json`` folder, or the ``shard-START-END`` folders that
``hf-adaptive-spec record`` writes (with the settings every shard shares in ``record_args.json``)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

from .recorded import ReplayRecording

SHARD_NAME = re.compile(r"shard-(\d+)-(\d+)")
MANIFEST = "record_args.json"


def finished_shards(directory: Path) -> list[tuple[int, int, Path]]:
    """``(start, end, folder)`` of each complete shard in ``directory``, by start; raises on overlaps."""
    found = sorted(
        (int(match[1]), int(match[2]), path)
        for path in directory.iterdir()
        if (match := SHARD_NAME.fullmatch(path.name)) and (path / "recording.json").is_file()
    ) if directory.is_dir() else []
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
    return ReplayRecording.concatenate([ReplayRecording.load(folder) for _, _, folder in shards])


def recording_manifest(path: str | Path) -> dict | None:
    """The ``record`` settings of a folder of shards or of one of its shards (what model, drafter and
    prompts); None for a recording saved without them (``ReplayRecording.save``)."""
    path = Path(path)
    manifests = [path / MANIFEST] + ([path.parent / MANIFEST] if (path / "recording.json").is_file() else [])
    found = next((manifest for manifest in manifests if manifest.is_file()), None)
    return None if found is None else json.loads(found.read_text(encoding="utf-8"))


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
