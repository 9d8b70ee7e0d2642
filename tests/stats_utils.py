"""A chi-square goodness-of-fit check with a stated tolerance (p < 1e-4 rejects)."""

from __future__ import annotations

import math
from collections import Counter

Z_1E4 = 3.719  # standard normal quantile for an upper tail of 1e-4


def chi_square(counts: Counter, probs: dict, min_expected: float = 5.0) -> tuple[float, float]:
    """(statistic, critical value at p = 1e-4); cells with expected count < 5 are pooled."""
    n = sum(counts.values())
    stat, pooled_obs, pooled_exp, cells = 0.0, 0, 0.0, 0
    for outcome, p in probs.items():
        expected = n * p
        if expected >= min_expected:
            stat += (counts.get(outcome, 0) - expected) ** 2 / expected
            cells += 1
        else:
            pooled_obs += counts.get(outcome, 0)
            pooled_exp += expected
    pooled_obs += sum(c for o, c in counts.items() if o not in probs)
    if pooled_exp > 0:
        stat += (pooled_obs - pooled_exp) ** 2 / max(pooled_exp, 1e-9)
        cells += 1
    df = max(cells - 1, 1)
    critical = df * (1 - 2 / (9 * df) + Z_1E4 * math.sqrt(2 / (9 * df))) ** 3  # Wilson-Hilferty
    return stat, critical
