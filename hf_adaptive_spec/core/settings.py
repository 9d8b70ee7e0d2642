"""Settings: sizes written as text on a command line, and comparing the settings a run was started with against a
resumed run's (one rule for every resume check)."""

from __future__ import annotations

from typing import Any


def changed_settings(stored: dict[str, Any], current: dict[str, Any], prefix: str = "") -> list[str]:
    """Each setting that differs, as ``name: stored -> current`` (nested settings by their dotted name; a setting
    one side lacks reads as None)."""
    changed = []
    for key in sorted(stored.keys() | current.keys()):
        before, after = stored.get(key), current.get(key)
        if isinstance(before, dict) and isinstance(after, dict):
            changed += changed_settings(before, after, f"{prefix}{key}.")
        elif before != after:
            changed.append(f"{prefix}{key}: {before!r} -> {after!r}")
    return changed


def distinct_ints_from_text(text: str) -> tuple[int, ...] | None:
    """``"4,2,4,8"`` as distinct ascending integers ``(2, 4, 8)``; None when a part is not an integer (the caller
    names what it expected)."""
    try:
        return tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        return None


def sampling_kwargs(temperature: float) -> dict[str, Any]:
    """``generate`` kwargs for ``temperature``: greedy at 0, else pure sampling from ``softmax(logits / T)``, top-k and
    top-p off (without them ``generate`` truncates to its default top-k of 50, or to the model's ``generation_config``
    top-k / top-p). The bench and the training data's regeneration sample so."""
    if temperature < 0:
        raise ValueError(f"--temperature must be 0 (greedy) or positive, got {temperature}.")
    if temperature == 0:
        return {"do_sample": False}
    return {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
