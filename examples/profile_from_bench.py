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

On the eager path a machine's speed drifts within a run (stock 6.3 to 15.0 tokens/s within one session on an AVX2
EPYC), and a tree of n nodes costs about one token plus a step plus a little per node. ``--curve linear`` fits that
shape, f(1) = a and f(n) = a + b + c (n - 2) for n >= 2, over every speculative turn of one or more runs (bench JSON or
progress files), each turn's verify time counted in eager stock's seconds per token in the same question and turn
of the same run, so the drift cancels; the profile keeps ``--like``'s one-token time and takes the fitted shape:

    python examples/profile_from_bench.py --curve linear --like PROFILE.json --output FITTED.json \
        --bench RUN1.progress.jsonl RUN2.json ...

Runs since 2026-12-02 keep each cycle's verify seconds (``verify_times``). ``--curve per-cycle`` takes them directly:
per verified size, the median over its cycles of every run, each cycle counted in eager stock's seconds per token of
its question and turn (the drift cancels), made non-decreasing in size as ``profile`` makes its own curve
(``monotone_seconds``), and scaled to ``--like``'s one-token time by the one-token cycles' median.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from hf_adaptive_spec.bench.methods import SIZED_SUFFIX
from hf_adaptive_spec.bench.report import read_report
from hf_adaptive_spec.profiling.hardware import HardwareProfile
from hf_adaptive_spec.profiling.measure import monotone_seconds

#: fewer turns drafting one level per cycle than this (e.g. a heuristic's odd turn) do not set the draft step
MIN_ONE_LEVEL_TURNS = 20


def fit_verify_seconds(turns: list[dict], min_cycles: int, size_of=lambda size: size) -> tuple[list[int], list[float]]:
    """Per verified size (``size_of`` it: e.g. its bucket) seen in at least ``min_cycles`` cycles, the seconds per
    cycle that best explain the total verify time of every turn that verified only such sizes."""
    seen = Counter(size_of(size) for turn in turns for size in turn["verified_tokens"])
    sizes = sorted(size for size, count in seen.items() if count >= min_cycles)
    if not sizes:  # numpy's LinAlgError ('1-dimensional array given') otherwise
        raise ValueError(f"No verified size (or bucket) was seen in {min_cycles} cycles (the most: "
                         f"{max(seen.values(), default=0)}): lower --min-cycles or bench longer.")
    turns = [turn for turn in turns if {size_of(size) for size in turn["verified_tokens"]} <= set(sizes)]
    counts = np.array(
        [[Counter(map(size_of, turn["verified_tokens"]))[size] for size in sizes] for turn in turns], dtype=float
    )
    seconds = np.linalg.lstsq(counts, np.array([turn["verify_time"] for turn in turns]), rcond=None)[0]
    return sizes, [float(s) for s in seconds]


def fill_unfitted_sizes(
    measured: HardwareProfile, sizes: list[int], seconds: list[float]
) -> tuple[list[int], list[float]]:
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
    parser.add_argument("--bench", required=True, nargs="+",
                        help="bench JSON (--json of hf-adaptive-spec bench) or progress JSONL; several with "
                        "--curve linear")
    parser.add_argument("--like", required=True, help="a HardwareProfile to copy the other fields from")
    parser.add_argument("--output", required=True, help="where to write the fitted profile")
    parser.add_argument("--min-cycles", type=int, default=None,
                        help="fit only sizes verified in this many cycles (default: 500; not with --curve linear)")
    parser.add_argument("--curve", choices=("per-size", "linear", "per-cycle"), default="per-size",
                        help="per-size: a time per verified size (or bucket), in seconds; linear: the eager path's "
                             "a / a + b + c (n - 2) shape, each turn against eager stock's in the same run; per-cycle: "
                             "the median of each size's cycles (runs keeping verify_times), against stock's likewise")
    args = parser.parse_args()
    if args.curve == "linear" and args.min_cycles is not None:
        parser.error("--curve linear fits every turn, whatever sizes it verified: --min-cycles would be ignored; "
                     "leave it out, or fit --curve per-size or per-cycle")
    args.min_cycles = 500 if args.min_cycles is None else args.min_cycles
    measured = HardwareProfile.load(args.like)
    if args.curve in ("linear", "per-cycle"):
        turns = [turn for path in args.bench for turn in turns_against_stock(load_records(path))]
        if args.curve == "linear":
            profile = linear_profile(measured, turns)
        else:
            profile = per_cycle_profile(measured, turns, args.min_cycles)
        profile.save(args.output)
        print(f"-> {args.output}")
        return
    if len(args.bench) != 1:
        raise SystemExit("--curve per-size fits one bench run (its seconds drift with the machine): give one --bench.")
    bench = read_report(args.bench[0])
    turns = fitted_turns(bench, bucketed=bool(measured.buckets))
    draft, drafted_by = draft_step_seconds(turns)
    if measured.buckets:
        cache_slots = bench["settings"]["options"]["max_cache_len"]
        profile = bucketed_profile(measured, turns, args.min_cycles, draft, cache_slots)
    else:
        sizes, seconds = fit_verify_seconds(turns, args.min_cycles)
        print(f"{len(turns)} speculative turns; "
              + ", ".join(f"verify {n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
        sizes, seconds = fill_unfitted_sizes(measured, sizes, seconds)
        profile = replace(  # context_length 0: fitted over the run's contexts, not measured at one
            measured, context_length=0, verify_tokens=sizes, verify_seconds=seconds, draft_step_seconds=draft
        )
        print("with the other measured sizes scaled: "
              + ", ".join(f"{n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
    profile.save(args.output)
    print(f"draft step: {1000 * draft:.2f} ms ({drafted_by}) -> {args.output}")


def load_records(path: str | Path) -> list[dict]:
    """A run's per-question records: a bench JSON's ``records`` or a progress file's lines (its settings line left
    out)."""
    if str(path).endswith(".jsonl"):
        text = Path(path).read_text(encoding="utf-8")
        return [record for record in map(json.loads, text.splitlines()) if "method" in record]
    return read_report(path)["records"]


def turns_against_stock(records: list[dict], stock: str = "stock") -> list[dict]:
    """The speculative turns of one run, each with ``stock_seconds_per_token``: the ``stock`` method's wall time per
    token in the same question and turn (turns of questions without a stock record are left out)."""
    stock_turns = {(record["question_id"], turn["turn"]): turn["wall_time"] / turn["new_tokens"]
                   for record in records if record["method"] == stock for turn in record["turns"]}
    if not stock_turns:
        raise ValueError(f"No {stock!r} turns in this run: --curve linear counts each turn in stock's time per token, "
                         f"so bench with --methods {stock},...")
    return [{**turn, "stock_seconds_per_token": stock_turns[record["question_id"], turn["turn"]]}
            for record in records if record["method"] != stock for turn in record["turns"]
            if turn["verified_tokens"] and (record["question_id"], turn["turn"]) in stock_turns]


def linear_curve_terms(verified_tokens: list[int]) -> list[float]:
    """A turn's cycles as the linear curve's terms: cycles (a), cycles verifying 2 or more tokens (b), and their
    tokens past 2 (c)."""
    return [len(verified_tokens), sum(n >= 2 for n in verified_tokens), sum(max(n - 2, 0) for n in verified_tokens)]


def fit_linear_curve(turns: list[dict]) -> tuple[float, float, float]:
    """``(a, b, c)`` of the verification curve f(1) = a, f(n) = a + b + c (n - 2), in stock's time per token, by least
    squares over ``turns`` (each with ``stock_seconds_per_token``, :func:`turns_against_stock`)."""
    if len(turns) < 3:
        raise ValueError(f"Fitting three coefficients needs at least 3 turns with verified tokens, got {len(turns)}.")
    terms = np.array([linear_curve_terms(turn["verified_tokens"]) for turn in turns], dtype=float)
    times = np.array([turn["verify_time"] / turn["stock_seconds_per_token"] for turn in turns])
    a, b, c = np.linalg.lstsq(terms, times, rcond=None)[0]
    return float(a), float(b), float(c)


def linear_profile(measured: HardwareProfile, turns: list[dict]) -> HardwareProfile:
    """``measured`` with its verification curve replaced by the linear fit's shape at its one-token time, at its sizes
    and 1 and 2 (the curve's corners, so that interpolating between them is the fit). Refuses a fit that is not
    monotone (a negative b or c) or a profile with buckets (the static path's cost is a step per bucket)."""
    if measured.buckets:
        raise ValueError("--curve linear fits the eager path; a profile with buckets is fitted per bucket "
                         "(--curve per-size).")
    a, b, c = fit_linear_curve(turns)
    print(f"{len(turns)} turns, {sum(len(t['verified_tokens']) for t in turns)} cycles; in stock's time per token: "
          f"f(1) = {a:.3f}, f(n >= 2) = {a + b:.3f} + {c:.4f} (n - 2)")
    if min(a, b, c) < 0:
        raise ValueError(f"The fit is not monotone in the tokens verified (a={a:.3f}, b={b:.3f}, c={c:.4f}): the runs "
                         "do not separate the sizes; add runs whose methods verify other sizes.")
    sizes = sorted({1, 2, *measured.verify_tokens})
    seconds = [measured.verify_time(1) * (1 if n == 1 else (a + b + c * (n - 2)) / a) for n in sizes]
    print("per cycle: " + ", ".join(f"{n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
    return replace(measured, context_length=0, verify_tokens=sizes, verify_seconds=seconds, recommendation=None)


def cycle_curve(turns: list[dict], min_cycles: int) -> tuple[list[int], list[float]]:
    """Per verified size seen in at least ``min_cycles`` cycles, the median of its cycles' verify seconds, each in
    stock's seconds per token of its question and turn (``turns`` from :func:`turns_against_stock`)."""
    by_size: dict[int, list[float]] = defaultdict(list)
    for turn in turns:
        if turn.get("verify_times") is None:
            raise ValueError("--curve per-cycle needs each cycle's verify seconds (verify_times), which bench runs "
                             "keep since 2026-12-02: bench again, or fit older runs with --curve linear.")
        for size, seconds in zip(turn["verified_tokens"], turn["verify_times"], strict=True):
            by_size[size].append(seconds / turn["stock_seconds_per_token"])
    sizes = sorted(size for size, cycles in by_size.items() if len(cycles) >= min_cycles)
    return sizes, [float(np.median(by_size[size])) for size in sizes]


def per_cycle_profile(measured: HardwareProfile, turns: list[dict], min_cycles: int) -> HardwareProfile:
    """``measured`` with the cycles' own verification curve (:func:`cycle_curve`) at its one-token time, its sizes
    the runs verified too rarely scaled like the nearest fitted size, then made non-decreasing in size."""
    if measured.buckets:
        raise ValueError("--curve per-cycle fits the eager path; a profile with buckets is fitted per bucket "
                         "(--curve per-size).")
    sizes, units = cycle_curve(turns, min_cycles)
    if not sizes or sizes[0] != 1:
        raise ValueError(f"The runs verified one token alone in fewer than {min_cycles} cycles, which sets the curve's "
                         "scale: add a method that verifies the root alone (e.g. a policy that skips), or lower "
                         "--min-cycles.")
    print(f"{len(turns)} turns; per cycle in one-token cycles: "
          + ", ".join(f"{n}: {u / units[0]:.3f}" for n, u in zip(sizes, units)))
    seconds = [measured.verify_time(1) * unit / units[0] for unit in units]
    sizes, seconds = fill_unfitted_sizes(measured, sizes, seconds)
    seconds = monotone_seconds(seconds)
    print("per cycle: " + ", ".join(f"{n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
    return replace(measured, context_length=0, verify_tokens=sizes, verify_seconds=seconds, recommendation=None)


def fitted_turns(bench: dict, bucketed: bool) -> list[dict]:
    """The speculative turns to fit; for a bucketed (static-path) profile, those of a ``--compile`` run decoded in its
    one cache of ``--max_cache_len`` slots (``+sized`` methods decode in shorter ones)."""
    if bucketed and not bench["settings"]["options"].get("compile"):
        raise ValueError("A profile with buckets times the static path: fit it from a bench run with --compile.")
    return [turn for record in bench["records"] if not (bucketed and record["method"].endswith(SIZED_SUFFIX))
            for turn in record["turns"] if turn["verified_tokens"]]


def draft_step_seconds(turns: list[dict]) -> tuple[float, str]:
    """Drafting seconds per draft level: from the turns that drafted one level per cycle (if enough did), else from all
    turns (per level of the verified trees, which a bench keeps: a pruned level's drafting is spread over the
    others)."""
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
    print(f"{len(turns)} speculative turns; "
          + ", ".join(f"bucket {n}: {1000 * s:.1f} ms" for n, s in zip(sizes, seconds)))
    filled = dict(zip(*fill_unfitted_sizes(measured, sizes, seconds)))
    bucket_seconds = [filled[bucket] for bucket in measured.buckets]
    unfitted = [bucket for bucket in measured.buckets if bucket not in sizes]
    if unfitted:
        print(f"buckets {unfitted} verified in fewer than {min_cycles} cycles: --like's times scaled like the "
              "nearest fitted")
    return replace(measured, context_length=0, bucket_seconds=bucket_seconds, draft_step_seconds=draft,
                   cache_slots=cache_slots, recommendation=None)


if __name__ == "__main__":
    main()
