"""Token-sequence helpers shared by replay (a lookup chain's greedy acceptance) and the bench
(where an output first differs from stock's)."""

from __future__ import annotations


def common_prefix_length(first: list[int], second: list[int]) -> int:
    """How many leading tokens ``first`` and ``second`` share."""
    return next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))
