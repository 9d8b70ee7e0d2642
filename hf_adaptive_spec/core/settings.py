"""Settings: sizes written as text on a command line, and comparing the settings a run was started with against a
resumed run's (one rule for every resume check)."""

from __future__ import annotations

import math
from typing import Any

#: the longest n-gram a prompt lookup matches when nothing says otherwise: transformers' ``max_matching_ngram_size``
#: default
DEFAULT_MAX_NGRAM_SIZE = 2


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


#: ``generate``'s truncating sampling warpers, each with the value that turns it off (transformers'
#: ``GenerationConfig`` defaults; min_p and top_h have none: any value builds their warper). Only these are neutralised:
#: the other logits processors (repetition_penalty, no_repeat_ngram_size, suppress_tokens, ...) apply when decoding
#: greedily too, so they are part of the distribution both modes decode from, and are left to the model's config.
PURE_SAMPLING = {"top_k": 0, "top_p": 1.0, "min_p": None, "top_h": None, "typical_p": 1.0, "epsilon_cutoff": 0.0,
                 "eta_cutoff": 0.0}


def sampling_kwargs(temperature: float) -> dict[str, Any]:
    """``generate`` kwargs for ``temperature``: greedy at 0, else pure sampling from ``softmax(logits / T)``: every
    truncating warper off (:data:`PURE_SAMPLING`; without them ``generate`` truncates to its default top-k of 50, or to
    whatever top-k, top-p, min-p, typical-p, epsilon or eta cutoff the model's ``generation_config`` sets). The bench
    and the training data's regeneration sample so."""
    if not 0 <= temperature < math.inf:  # NaN and infinity fail inside generate, after the model loaded
        raise ValueError(f"--temperature must be 0 (greedy) or a finite positive number, got {temperature}.")
    if temperature == 0:
        return {"do_sample": False}
    return {"do_sample": True, "temperature": temperature, **PURE_SAMPLING}
