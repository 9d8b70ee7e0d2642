"""A drafting cycle's drafting time in a live bench run, by the committed tokens its first step read.

Per engine method of a bench JSON (turns carry per-cycle ``draft_times``, since session 53): the drafted cycles grouped
as the profile's catch-up table groups them (the drafter's step buckets 4, 8, 16, then doublings); a turn's first
drafted cycle, which reads the prompt, is left out (the bench does not keep prompt lengths).
Usage: python catch_up_live.py BENCH.json METHOD [METHOD ...]
"""

import json
import statistics
import sys

from hf_adaptive_spec.profiling.hardware import unread_after

BOUNDS = (4, 8, 16, 32, 64, 128)


def drafted_cycles(turn: dict):
    """``(tokens read, seconds)`` of each drafted cycle after the turn's first."""
    unread, first = None, True
    for accepted, depth, seconds in zip(turn["accepted_lengths"], turn["draft_depths"], turn["draft_times"]):
        if depth > 0 and not first:
            yield unread, seconds
        drafted = depth > 0
        first = first and not drafted
        unread = unread_after(unread or 0, drafted, accepted + 1)


def main() -> None:
    report = json.load(open(sys.argv[1]))
    for method in sys.argv[2:]:
        groups = {}
        for record in report["records"]:
            if record["method"] == method:
                for turn in record["turns"]:
                    for tokens, seconds in drafted_cycles(turn):
                        groups.setdefault(next((b for b in BOUNDS if tokens <= b), BOUNDS[-1]), []).append(seconds)
        print(f"{method}: " + ", ".join(f"<= {b} tokens: {1000 * statistics.median(s):.1f} ms ({len(s)} cycles)"
                                          for b, s in sorted(groups.items())))


if __name__ == "__main__":
    main()
