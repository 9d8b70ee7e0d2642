"""``hf-adaptive-spec record``'s manifest: the settings every shard of a recording shares, written once and checked
by each later run into the same folder."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.files import write_text_atomically
from ..profiling.identity import artifact_name
from .storage import MANIFEST, finished_shards, read_manifest


def without_unused_prompt_set(manifest: dict) -> dict:
    """A manifest as :func:`prompt_source` writes it: earlier ones also named the ``--prompts`` default beside the
    file or questions actually recorded (and a ``--sharegpt-file`` that only a prompts file's later turns read)."""
    if "prompts_file" in manifest or "questions" in manifest:
        later_turns = "prompts_file" in manifest and manifest.get("turns", 1) > 1 and manifest.get("sharegpt_file")
        unused = ("prompts",) if later_turns else ("prompts", "sharegpt_file")
        return {key: value for key, value in manifest.items() if key not in unused}
    return manifest


def _with_resolved_names(manifest: dict) -> dict:
    """A manifest with its target and drafter named as :func:`check_manifest` writes them now: a local folder by
    its absolute path (earlier manifests kept the path as typed, which means nothing from another directory)."""
    named = {key: artifact_name(manifest[key]) for key in ("model", "eagle3_checkpoint") if manifest.get(key)}
    return {**manifest, **named}


def check_manifest(directory: Path, settings: dict) -> None:
    """Write the settings every shard shares, or check that an earlier run used the same. An earlier manifest that
    named a local target or drafter as typed is rewritten with its absolute path, which later readers
    (:func:`~hf_adaptive_spec.environments.provenance.recorded_pair`) resolve from any directory."""
    path = directory / MANIFEST
    if not path.is_file() or not finished_shards(directory):  # a run that recorded no shard binds no later one
        directory.mkdir(parents=True, exist_ok=True)
        _write_manifest(path, settings)
        return
    on_disk = read_manifest(path)
    resolved = _with_resolved_names(on_disk)
    earlier = without_unused_prompt_set(resolved)
    check_same_weights(directory, earlier, settings, "target")
    check_same_weights(directory, earlier, settings, "drafter")
    for unknown in _kept_since(earlier):  # recorded before it was kept: the earlier shards' value is unknown
        settings = {key: value for key, value in settings.items() if key != unknown}
    if earlier != settings:
        changed = sorted(key for key in settings.keys() | earlier.keys() if settings.get(key) != earlier.get(key))
        raise ValueError(
            f"{directory} was recorded with other settings ({', '.join(changed)} differ from {path}): "
            "use the same options or another --output."
        )
    if resolved != on_disk:
        _write_manifest(path, resolved)


def _kept_since(earlier: dict) -> list[str]:
    """The settings a manifest written before they were kept lacks: the weights' digests, and the ``--sharegpt-file``
    that continues a prompts file's later turns (kept since 2026-12-06): not compared, as their values are unknown."""
    later_turns = "prompts_file" in earlier and earlier.get("turns", 1) > 1
    optional = ("drafter_weights", "target_weights", *(("sharegpt_file",) if later_turns else ()))
    return [key for key in optional if key not in earlier]


def check_same_weights(directory: Path, earlier: dict, settings: dict, role: str) -> None:
    """Refuse to add shards made with other ``role`` (``"target"`` or ``"drafter"``) weights than the earlier
    shards' under the same name (a model retrained or replaced in its folder): one recording would hold two targets'
    generations, or two drafters' acceptance, and a policy trained on it would learn from both."""
    before, now = earlier.get(f"{role}_weights"), settings.get(f"{role}_weights")
    if before is not None and before != now:
        name = (settings.get("model") or "the default model" if role == "target"
                else settings.get("eagle3_checkpoint") or settings.get("drafter"))
        raise ValueError(
            f"{directory} was recorded with other {role} weights (digest {before}; this {role}'s is {now}), under "
            f"the same name {name}: the {role} was retrained or replaced since. Record into another --output (a "
            f"policy trained on both would learn from two {role}s)."
        )


def _write_manifest(path: Path, manifest: dict) -> None:
    """Write ``manifest`` to ``path`` whole or not at all."""
    write_text_atomically(path, json.dumps(manifest, indent=2) + "\n")
