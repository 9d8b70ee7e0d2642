"""The settings an output file's records were made with, kept beside it in ``<output>.settings.json``: written with
its first records, and checked when a run adds to it, so records made with other settings (another target, dtype, seed
or generation settings; in bfloat16 or float16 another batch size or device) are refused, each difference named
``name: stored -> new``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.files import write_text_atomically
from ..core.settings import changed_settings, sampling_kwargs
from ..default_model import DEFAULT_MODEL_ID
from .jsonl_output import written_ids

if TYPE_CHECKING:
    from .regenerate import RegenerationConfig

logger = logging.getLogger(__name__)


#: how a sampled file's batches are seeded (:func:`batch_seed`): files sampled before 2026-12-05 drew every batch from
#: one global generator, which a resumed run restarted, and their settings lack it
SAMPLING_SEED = "per batch, from --seed and the batch's conversation ids"

#: the settings :func:`regeneration_settings` records from a :class:`RegenerationConfig`
_GENERATION = ("max_new_tokens", "temperature", "max_turns", "max_prompt_tokens")
#: settings recorded since 2026-12-07: a settings file written before them lacks them, and they are not compared
_RECORDED_LATER = ("batch_size", "device", "exclude_ids_from")
#: settings a batched answer depends on in a half-precision dtype (in float32 it is the one-at-a-time answer, whatever
#: the batch: compared in these dtypes only)
_BATCH_DEPENDENT = ("batch_size", "device")
_HALF_PRECISION = ("bfloat16", "float16")
#: the setting naming the held-out file a selection kept out: ``{"file", "ids", "ids_sha256"}``, compared by digest
EXCLUDED = "exclude_ids_from"


def settings_path(output_path: str | Path) -> Path:
    """Where the settings an output file's answers were made with are kept: ``<output>.settings.json``."""
    return Path(f"{output_path}.settings.json")


def regeneration_settings(
    config: RegenerationConfig, seed: int, model: str | None, dtype: str, device: str
) -> dict[str, object]:
    """The settings that make regenerated answers what they are: the target (``model``: a folder or Hub id, None for
    the default model), its ``dtype`` and ``device`` (type), the seed, and the generation settings of ``config``
    (its batch size included: in bfloat16 a batched answer depends on the batch)."""
    settings: dict[str, object] = {"model": model, "dtype": dtype, "device": device, "seed": seed,
                                   "batch_size": config.batch_size}
    settings |= {name: getattr(config, name) for name in _GENERATION}
    if config.temperature > 0:  # files sampled before 2026-12-05 were cut to generate's default top-k of 50, or
        # to the target's generation_config min_p / typical_p / epsilon / eta cutoffs
        settings |= {"sampling": sampling_kwargs(config.temperature), "sampling_seed": SAMPLING_SEED}
    return settings


def _compared(stored: dict[str, object], current: dict[str, object]) -> tuple[dict, dict, list[str]]:
    """``stored`` and ``current`` as they are compared, and the settings ``stored`` predates (not compared)."""
    stored, current = dict(stored), dict(current)
    predates = [key for key in _RECORDED_LATER if key not in stored and current.get(key) is not None]
    for key in _RECORDED_LATER:
        if key not in stored:
            current.pop(key, None)
    if current.get("dtype") not in _HALF_PRECISION:
        for key in _BATCH_DEPENDENT:
            stored.pop(key, None)
            current.pop(key, None)
    for settings in (stored, current):
        if "model" in settings and settings["model"] in (None, "default"):
            settings["model"] = DEFAULT_MODEL_ID
    before, after = stored.get(EXCLUDED), current.get(EXCLUDED)
    if (before or {}).get("ids_sha256") == (after or {}).get("ids_sha256"):
        stored.pop(EXCLUDED, None)
        current.pop(EXCLUDED, None)
    else:
        stored[EXCLUDED], current[EXCLUDED] = _held_out(before), _held_out(after)
    return stored, current, predates


def _held_out(setting: dict | None) -> str | None:
    if setting is None:
        return None
    return f"the {setting['ids']} ids of {setting['file']} (sha256 {setting['ids_sha256']})"


def check_output_settings(output_path: str | Path, settings: dict[str, object], notes: bool = True) -> bool:
    """Refuse to add to ``output_path`` when the records in it were made with other settings than ``settings``
    (those in ``<output>.settings.json``), naming each ``name: stored -> new``; return whether ``settings`` are to
    be written there (:func:`write_output_settings`) with this run's first records.

    Not compared: the settings a settings file predates (:data:`_RECORDED_LATER`), and in float32 the batch size and
    device (a float32 answer is the target's one-at-a-time answer; in bfloat16 or float16 it depends on the batch).
    An output with records and no settings file (written before settings were kept, or concatenated from other
    files) cannot be checked: a warning says so, and this run's settings are written, so later resumes are checked. A
    settings file beside an output with no records (left by a run that failed early) is ignored, with a note.
    ``notes``: log those warnings (a check made again later in the same run leaves them to that one).

    Raises:
        ValueError: the output's records were made with other settings.
    """
    # before the file's cut last line is dropped (a rerun after a crash checks first): that line is no record
    path, records = settings_path(output_path), len(written_ids(Path(output_path), skip_cut_last_line=True))
    if not records:
        if path.is_file() and notes:
            logger.warning("%s holds no records: its settings file %s (left by a run that wrote none) is ignored, and "
                           "replaced with this run's settings when it writes its first records.", output_path, path)
        return True
    if not path.is_file():
        if notes:
            logger.warning(
                "%s holds %d records but no settings file %s: they were made with settings this run cannot check (a "
                "file written before settings were kept, or concatenated from others). This run's settings are written "
                "to %s, so later resumes are checked against them: add to the file only with the settings its records "
                "were made with.", output_path, records, path, path,
            )
        return True
    stored, current, predates = _compared(json.loads(path.read_text(encoding="utf-8")), settings)
    changed = changed_settings(stored, current)
    if changed:
        batch = (" (in bfloat16 and float16 an answer depends on the batch it is generated in: resume with the same "
                 "batch size and device)" if any(line.split(":", 1)[0] in _BATCH_DEPENDENT for line in changed) else "")
        # the script records where its conversations come from, which a call from Python does not give
        missing = sorted(key for key in set(stored) - set(current) if stored[key] is not None)
        given = (f" The file's settings name {', '.join(missing)}, which this call does not give: from Python, pass "
                 "them as regenerate(..., settings={...}) (the trainers/regenerate_sharegpt.py run that wrote the file "
                 "recorded them)." if missing else "")
        raise ValueError(f"{output_path} was written with other settings ({'; '.join(changed)}){batch}: pass the same "
                         f"ones to add to it, or write to another output file.{given}")
    if predates and notes:
        logger.warning("%s was written before %s were kept in %s: they are not checked.", output_path,
                       ", ".join(predates), path)
    return False


def write_output_settings(output_path: str | Path, settings: dict[str, object]) -> None:
    """Write ``settings`` to ``<output>.settings.json`` (:func:`check_output_settings`)."""
    path = settings_path(output_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(settings, indent=2) + "\n")
