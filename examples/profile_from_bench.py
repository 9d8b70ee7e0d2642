"""A hardware profile fitted from a bench run's own timings, to check what the replay models.

    python examples/profile_from_bench.py --bench results/policies_specbench130_epyc.json \
        --like artifacts/replay/profile.json --output artifacts/replay/profile_from_bench.json

`hf-adaptive-spec profile` times a few synthetic forwards once; a bench run times thousands of
real cycles. This fits, by least squares over the turns of the speculative methods, the engine's
verification time per cycle for each verified size the run used (acceptance and cache update
included), and takes the drafting time per draft level from the methods that draft one level per
cycle. A size the run never verified keeps the ``--like`` profile's measured time, scaled by the
fitted-to-measured ratio of the nearest fitted size: interpolating between fitted sizes would be
wrong where verification cost is not monotone in size (on the EPYC, 2–4 tokens cost more than 6).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from hf_adaptive_spec.profiling.hardware import HardwareProfile


def fit_verify_seconds(turns: list[dict], min_cycles: int) -> tuple[list[int], list[float]]:
    """Per verified size seen in at least ``min_cycles`` cycles, the seconds per cycle that best explain
    the total verify time of every turn that verified only such sizes."""
    seen = Counter(size for turn in turns for size in turn["verified_tokens"])
    sizes = sorted(size for size, count in seen.items() if count >= min_cycles)
    turns = [turn for turn in turns if set(turn["verified_tokens"]) <= set(sizes)]
    counts = np.array([[Counter(turn["verified_tokens"])[size] for size in sizes] for turn in turns], dtype=float)
    seconds = np.linalg.lstsq(counts, np.array([turn["verify_time"] for turn in turns]), rcond=None)[0]
    return sizes, [float(s) for s in seconds]


def fill_unfitted_sizes(measured: HardwareProfile, sizes: list[int], seconds: list[float]) -> tuple[list[int], list[float]]:
    """Fitted sizes plus every other size of ``measured``, scaled like its nearest fitted size."""
    fitted = dict(zip(sizes, seconds))
    own = dict(zip(measured.verify_tokens, measured.verify_seconds))
    filled = dict(fitted)
    for size, value in own.items():
        if size not in fitted:
            nearest = min(fitted, key=lambda fitted_size: (abs(fitted_size - size), fitted_size))
            filled[size] = value * fitted[nearest] / measured.verify_time(nearest)
    return sorted(filled), [filled[size] for size in sorted(filled)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="bench JSON (--json of hf-adaptive-spec bench)")
    parser.add_argument("--like", required=True, help="a HardwareProfile to copy the other fields from")
    parser.add_argument("--output", required=True, help="where to write the fitted profile")
    parser.add_argument("--min-cycles", type=int, default=500, help="fit only sizes verified in this many cycles")
    args = parser.parse_args()
    records = json.loads(Path(args.bench).read_text(encoding="utf-8"))["records"]
    turns = [turn for record in records for turn in record["turns"] if turn["verified_tokens"]]
    sizes, seconds = fit_verify_seconds(turns, args.min_cycles)
    one_level = [turn for turn in turns if set(turn["draft_depths"]) == {1}]  # every cycle drafted one level
    if not one_level:
        raise ValueError("No turn drafted exactly one level per cycle: run a depth-1 static tree in the bench.")
    draft = sum(turn["draft_time"] for turn in one_level) / sum(len(turn["draft_depths"]) for turn in one_level)
    measured = HardwareProfile.load(args.like)
    print(f"{len(turns)} speculative turns; " + ", ".join(f"verify {n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
    sizes, seconds = fill_unfitted_sizes(measured, sizes, seconds)
    profile = replace(  # context_length 0: fitted over the run's contexts, not measured at one
        measured, context_length=0, verify_tokens=sizes, verify_seconds=seconds, draft_step_seconds=draft
    )
    profile.save(args.output)
    print("with the other measured sizes scaled: " + ", ".join(f"{n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
    print(f"draft step: {1000 * draft:.2f} ms ({len(one_level)} one-level turns) -> {args.output}")


if __name__ == "__main__":
    main()
