"""Token-sequence helpers shared by replay (a lookup chain's greedy acceptance), the bench
(where an output first differs from stock's) and everything that stops where ``generate`` stops."""

from __future__ import annotations

from typing import Any


def common_prefix_length(first: list[int], second: list[int]) -> int:
    """How many leading tokens ``first`` and ``second`` share."""
    return next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))


def end_of_sequence_ids(model: Any, tokenizer: Any = None) -> tuple[int, ...]:
    """The end-of-sequence ids that stop ``model.generate``: its generation config's ``eos_token_id``
    (an int, a list, or None), else ``tokenizer.eos_token_id`` when a tokenizer is given; () when neither has one."""
    eos = model.generation_config.eos_token_id
    if eos is None and tokenizer is not None:
        eos = tokenizer.eos_token_id
    return () if eos is None else (eos,) if isinstance(eos, int) else tuple(eos)
