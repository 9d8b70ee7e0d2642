"""What a drafted cycle of the live bench cost in drafting, against the tokens the drafter had to catch up on.

After cycles that drafted nothing (LookupFirstPolicy's matched cycles), the EAGLE-3 drafter first reads every token
committed since it last drafted. Per turn of a bench JSON, least squares of the drafting time on (drafted cycles,
tokens caught up on). Usage: python catch_up_fit.py BENCH.json METHOD [METHOD ...]
"""

import json
import sys

import numpy as np


def turn_counts(turn: dict) -> tuple[int, int]:
    drafted = caught_up = pending = 0
    for accepted, depth in zip(turn["accepted_lengths"], turn["draft_depths"]):
        if depth > 0:
            drafted, caught_up, pending = drafted + 1, caught_up + pending, 0
        pending += accepted + 1
    return drafted, caught_up


def main() -> None:
    report = json.load(open(sys.argv[1]))
    for method in sys.argv[2:]:
        turns = [turn for record in report["records"] if record["method"] == method for turn in record["turns"]]
        counts = np.array([turn_counts(turn) for turn in turns], dtype=float)
        seconds = np.array([turn["draft_time"] for turn in turns])
        (per_cycle, per_token), *_ = np.linalg.lstsq(counts, seconds, rcond=None)
        print(f"{method}: {counts[:, 0].sum():.0f} drafted cycles, {counts[:, 1].sum() / counts[:, 0].sum():.2f} tokens "
              f"caught up per drafted cycle, {1000 * seconds.sum() / counts[:, 0].sum():.1f} ms drafting per drafted "
              f"cycle; fit: {1000 * per_cycle:.1f} ms per cycle + {1000 * per_token:.1f} ms per token caught up")


if __name__ == "__main__":
    main()
