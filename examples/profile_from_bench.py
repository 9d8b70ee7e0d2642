"""A hardware profile fitted from a bench run's own timings, to check what the replay models.

    python examples/profile_from_bench.py --bench results/policies_specbench130_epyc.json \
        --like artifacts/replay/profile.json --output artifacts/replay/profile_from_bench.json

`hf-adaptive-spec profile` times a few synthetic forwards once; a bench run times thousands of
real cycles. This fits, by least squares over the turns of the speculative methods, the engine's
verification time per cycle for each verified size the run used (acceptance and cache update
included), and takes the drafting time per draft level from the methods that draft one level per
cycle (or, where none does, from all of them). A size the run never verified keeps the ``--like`` profile's measured
time, scaled by the fitted-to-measured ratio of the nearest fitted size: interpolating between fitted sizes would be
wrong where verification cost is not monotone in size (on the EPYC, 2–4 tokens cost more than 6).

On the static-cache path (a ``--like`` profile with buckets, from a ``--compile`` bench) a verified size costs its
bucket: the fit is per bucket and becomes the profile's ``bucket_seconds``, each in the bench's cache
(``--max_cache_len``); a bucket the run never verified keeps the ``--like`` profile's time.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from hf_adaptive_spec.bench.methods import SIZED_SUFFIX
from hf_adaptive_spec.profiling.hardware import HardwareProfile

#: fewer turns drafting one level per cycle than this (e.g. a heuristic's odd turn) do not set the draft step
MIN_ONE_LEVEL_TURNS = 20


def fit_verify_seconds(turns: list[dict], min_cycles: int, size_of=lambda size: size) -> tuple[list[int], list[float]]:
    """Per verified size (``size_of`` it: e.g. its bucket) seen in at least ``min_cycles`` cycles, the seconds per
    cycle that best explain the total verify time of every turn that verified only such sizes."""
    seen = Counter(size_of(size) for turn in turns for size in turn["verified_tokens"])
    sizes = sorted(size for size, count in seen.items() if count >= min_cycles)
    turns = [turn for turn in turns if {size_of(size) for size in turn["verified_tokens"]} <= set(sizes)]
    counts = np.array([[Counter(map(size_of, turn["verified_tokens"]))[size] for size in sizes] for turn in turns], dtype=float)
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
    bench = json.loads(Path(args.bench).read_text(encoding="utf-8"))
    measured = HardwareProfile.load(args.like)
    turns = fitted_turns(bench, bucketed=bool(measured.buckets))
    draft, drafted_by = draft_step_seconds(turns)
    if measured.buckets:
        profile = bucketed_profile(measured, turns, args.min_cycles, draft, bench["settings"]["options"]["max_cache_len"])
    else:
        sizes, seconds = fit_verify_seconds(turns, args.min_cycles)
        print(f"{len(turns)} speculative turns; " + ", ".join(f"verify {n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
        sizes, seconds = fill_unfitted_sizes(measured, sizes, seconds)
        profile = replace(  # context_length 0: fitted over the run's contexts, not measured at one
            measured, context_length=0, verify_tokens=sizes, verify_seconds=seconds, draft_step_seconds=draft
        )
        print("with the other measured sizes scaled: " + ", ".join(f"{n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
    profile.save(args.output)
    print(f"draft step: {1000 * draft:.2f} ms ({drafted_by}) -> {args.output}")


def fitted_turns(bench: dict, bucketed: bool) -> list[dict]:
    """The speculative turns to fit; for a bucketed (static-path) profile, those of a ``--compile`` run decoded in its
    one cache of ``--max_cache_len`` slots (``+sized`` methods decode in shorter ones)."""
    if bucketed and not bench["settings"]["options"].get("compile"):
        raise ValueError("A profile with buckets times the static path: fit it from a bench run with --compile.")
    return [turn for record in bench["records"] if not (bucketed and record["method"].endswith(SIZED_SUFFIX))
            for turn in record["turns"] if turn["verified_tokens"]]


def draft_step_seconds(turns: list[dict]) -> tuple[float, str]:
    """Drafting seconds per draft level: from the turns that drafted one level per cycle (if enough did), else from all turns
    (per level of the verified trees, which a bench keeps: a pruned level's drafting is spread over the others)."""
    one_level = [turn for turn in turns if set(turn["draft_depths"]) == {1}]  # every cycle drafted one level
    chosen = one_level if len(one_level) >= MIN_ONE_LEVEL_TURNS else turns
    levels = sum(sum(turn["draft_depths"]) for turn in chosen)  # a bench keeps the verified trees' depths
    seconds = sum(turn["draft_time"] for turn in chosen) / max(levels, 1)
    if chosen is one_level:
        return seconds, f"{len(chosen)} one-level turns"
    return seconds, (f"all {len(turns)} turns, per verified level: fewer than {MIN_ONE_LEVEL_TURNS} turns drafted one "
                     "level per cycle, so this is high where trees were pruned below the levels drafted")


def bucketed_profile(measured: HardwareProfile, turns: list[dict], min_cycles: int, draft: float, cache_slots: int):
    """``measured`` with each bucket's fitted cycle time as its ``bucket_seconds``; a bucket the run verified too
    rarely keeps ``measured``'s time scaled like the nearest fitted bucket (it was timed in another cache)."""
    sizes, seconds = fit_verify_seconds(turns, min_cycles, measured.bucket_for)
    print(f"{len(turns)} speculative turns; " + ", ".join(f"bucket {n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
    if not sizes:
        raise ValueError(f"No bucket was verified in {min_cycles} cycles: lower --min-cycles or bench longer.")
    filled = dict(zip(*fill_unfitted_sizes(measured, sizes, seconds)))
    bucket_seconds = [filled[bucket] for bucket in measured.buckets]
    unfitted = [bucket for bucket in measured.buckets if bucket not in sizes]
    if unfitted:
        print(f"buckets {unfitted} verified in fewer than {min_cycles} cycles: --like's times scaled like the nearest fitted")
    return replace(measured, context_length=0, bucket_seconds=bucket_seconds, draft_step_seconds=draft,
                   cache_slots=cache_slots, recommendation=None)


if __name__ == "__main__":
    main()
