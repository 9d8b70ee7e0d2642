"""Paired comparison of the methods of one bench run against one of them, question by question.

In bfloat16 each method decodes a text of its own, so two methods' totals differ by speed and by how predictable
each text was; over many questions the paired ratio and a bootstrap over questions say how sure a difference is.

    python -m hf_adaptive_spec.bench.paired results/run.json --base eagle3-lookup-first@2/4/8+lookup+sized

reads a report (``--json``'s file) or the progress file of a run still going.
"""

from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import dataclass
from pathlib import Path

from .errors import BenchError
from .methods import REFERENCE_METHOD
from .progress import read_progress
from .records import QuestionRecord, fp32_reference_records
from .report import not_interleaved, read_report
from .summary import _throughput

#: the fewest bootstrap resamples whose 2.5% point, at 0.025 (n - 1), lies a whole resample or more from the end:
#: with fewer, the interval's ends are placed by rounding rather than by the resamples
MIN_RESAMPLES = 41


@dataclass(frozen=True)
class PairedComparison:
    """One method against the base over the questions both ran.

    Args:
        method: the method compared; ``questions``: questions both ran.
        total: tokens/s over all those questions, as a ratio of the base's (a ratio of sums).
        median: the median of the per-question ratios; ``faster_in``: questions where the method was faster.
        low, high: the 2.5% and 97.5% points of ``total`` over a bootstrap resampling the questions (None for a
            single question).
    """

    method: str
    questions: int
    total: float
    median: float
    faster_in: int
    low: float | None
    high: float | None


def compare_paired(
    records: list[QuestionRecord], base: str, resamples: int = 2000, seed: int = 0
) -> list[PairedComparison]:
    """Every method of ``records`` against ``base``, in the order the methods first appear.

    Raises:
        BenchError: when no record is of ``base``, or ``resamples`` is below :data:`MIN_RESAMPLES`.
    """
    if resamples < MIN_RESAMPLES:
        raise BenchError(f"resamples must be at least {MIN_RESAMPLES} for a 95% interval whose ends are distinct "
                         f"resamples, got {resamples}")
    by_method: dict[str, dict[int | str, QuestionRecord]] = {}
    for record in records:
        of_method = by_method.setdefault(record.method, {})
        if record.question_id in of_method:
            raise BenchError(f"question {record.question_id} of {record.method!r} is in 2 records; compare one run's "
                             "report (or its progress file), not the records of several put together")
        of_method[record.question_id] = record
    if base not in by_method:
        raise BenchError(f"no record of the base method {base!r}; the run's methods are {sorted(by_method)}")
    return [
        _compare(method, by_method[method], by_method[base], resamples, random.Random(seed))
        for method in by_method
    ]


def _compare(
    method: str,
    records: dict[int | str, QuestionRecord],
    base: dict[int | str, QuestionRecord],
    resamples: int,
    rng: random.Random,
) -> PairedComparison:
    # a question the method answered with no tokens counts (at 0x); one the base did is no ratio
    paired = [q for q in records if q in base and _throughput(base[q].turns) > 0 and _seconds(records[q]) > 0]
    for q in paired:
        turns, base_turns = [t.turn for t in records[q].turns], [t.turn for t in base[q].turns]
        if turns != base_turns:
            raise BenchError(f"question {q}: {method!r} has turns {turns}, the base {base[q].method!r} "
                             f"{base_turns}; compare records of one run")
    pairs = [(_tokens_and_seconds(records[q]), _tokens_and_seconds(base[q])) for q in paired]
    ratios = [_total_ratio([pair]) for pair in pairs]  # over the very questions n and the total count
    low = high = None
    if len(pairs) > 1:
        low, high = central_95(sorted(_total_ratio([rng.choice(pairs) for _ in pairs]) for _ in range(resamples)))
    return PairedComparison(
        method=method,
        questions=len(pairs),
        total=_total_ratio(pairs) if pairs else float("nan"),
        median=statistics.median(ratios) if ratios else float("nan"),
        faster_in=sum(ratio > 1 for ratio in ratios),
        low=low,
        high=high,
    )


def central_95(ordered: list[float]) -> tuple[float, float]:
    """The 2.5% and 97.5% points of sorted values: the order statistics as far from either end (the nearest to
    numpy's linear percentiles at positions 0.025 (n - 1) and 0.975 (n - 1)), so the interval drops as many
    resamples below as above."""
    from_end = round(0.025 * (len(ordered) - 1))
    return ordered[from_end], ordered[len(ordered) - 1 - from_end]


def _seconds(record: QuestionRecord) -> float:
    return sum(turn.wall_time for turn in record.turns)


def _tokens_and_seconds(record: QuestionRecord) -> tuple[int, float]:
    return sum(turn.new_tokens for turn in record.turns), _seconds(record)


def _total_ratio(pairs: list[tuple[tuple[int, float], tuple[int, float]]]) -> float:
    tokens = sum(method[0] for method, _ in pairs)
    seconds = sum(method[1] for method, _ in pairs)
    base_tokens = sum(base[0] for _, base in pairs)
    base_seconds = sum(base[1] for _, base in pairs)
    return (tokens / seconds) / (base_tokens / base_seconds)


def load_records(path: Path) -> list[QuestionRecord]:
    """The records of a bench report (``.json``) or of a progress file (``.jsonl``)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return list(read_progress(path)[1].values())
    records = read_report(path)["records"]
    try:
        return [QuestionRecord.from_dict(record) for record in records]
    except BenchError as error:
        raise BenchError(f"{path}: {error}") from None


def _of_categories(records: list[QuestionRecord], categories: list[str]) -> list[QuestionRecord]:
    unknown = sorted(set(categories) - {record.category for record in records})
    if unknown:
        raise BenchError(
            f"no question of --categories {unknown}; the run's are {sorted({r.category for r in records})}"
        )
    return [record for record in records if record.category in categories]


def format_comparisons(comparisons: list[PairedComparison], base: str) -> str:
    lines = [f"against {base} (tokens/s ratios; bootstrap 95% over questions)"]
    for c in comparisons:
        if not c.questions:
            lines.append(f"{c.method:46s} n={c.questions:4d}  no question that {base!r} also ran (with tokens)")
            continue
        spread = f"  [{c.low:.3f}-{c.high:.3f}]" if c.low is not None and c.method != base else ""
        lines.append(
            f"{c.method:46s} n={c.questions:4d}  total {c.total:.3f}x  median {c.median:.3f}x  "
            f"faster in {c.faster_in} of {c.questions}{spread}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hf_adaptive_spec.bench.paired", description=__doc__.split("\n")[0])
    parser.add_argument("report", type=Path, help="a bench report (.json) or its progress file (.jsonl)")
    parser.add_argument("--base", required=True, help="the method the others are compared with")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--categories", help="only the questions of these categories (comma-separated)")
    args = parser.parse_args(argv)
    if args.resamples < MIN_RESAMPLES:
        parser.error(f"--resamples must be at least {MIN_RESAMPLES} (the 95% interval's ends), got {args.resamples}")
    try:
        records = load_records(args.report)
        records += fp32_reference_records(records, REFERENCE_METHOD)  # the peer eager float32 stock, as the report
        if args.categories is not None:  # "" (an unset shell variable) named none: it compared them all
            records = _of_categories(records, [name.strip() for name in args.categories.split(",")])
        comparisons = compare_paired(records, args.base, args.resamples, args.seed)
    except (BenchError, OSError) as error:
        parser.exit(2, f"error: {error}\n")
    print(format_comparisons(comparisons, args.base))
    apart = not_interleaved(records, args.base)
    if apart:
        print(f"not interleaved with {args.base} (measured in another session of a resumed run, their ratio compares "
              f"two sessions of the machine): {', '.join(f'{m} on {n} questions' for m, n in apart.items())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
