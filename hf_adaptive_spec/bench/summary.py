"""Aggregate records into per-method figures: throughput, speedup against ``stock``, τ, time split."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

from .methods import REFERENCE_METHOD
from .records import POLICY_FIT_REPORTS, QuestionRecord, TurnRecord


@dataclass
class MethodSummary:
    """One method over a set of questions.

    Args:
        method: the method name.
        questions: questions run; ``turns``: turns run.
        new_tokens: tokens generated in all; ``wall_time``: seconds in all.
        throughput: ``new_tokens / wall_time``.
        speedup: ``throughput`` over the reference method's on the same questions (Spec-Bench's
            speedup; the reference is ``stock`` unless the bench's ``--reference`` names another).
        median_speedup: median over questions of the per-question throughput ratio to the reference.
        mean_accepted_tokens: τ, tokens per target forward.
        mean_accepted_tokens_source: ``"speculation_stats"`` (mean of accepted + 1 per cycle) or
            ``"target_passes"`` (tokens over counted full-depth target forwards, prefill included).
        identical: every turn's tokens equal ``stock``'s; None when not checked (sampling).
        mismatched_turns: turns whose tokens differ from ``stock``'s.
        time_split: seconds in ``draft``, ``verify``, ``policy`` and ``other``, when the method reports them.
        accepted_length_histogram: ``[cycles accepting 0 drafts, 1 draft, ...]``, when reported.
        mean_draft_depth / mean_verified_tokens: per cycle, the levels the drafter drafted (a prompt-lookup
            chain not counted) and the verified tree's size (root and lookup chain included), when reported.
        speedup_vs_stock: ``throughput`` over ``stock``'s, whatever the reference.
        reference: the method ``speedup`` is relative to.
        fp32_agreement: below float32 and greedy, the mean over turns of the fraction of the float32 stock
            answer produced before the first divergence; None in float32 runs and when sampling.
        fp32_identical_share: below float32, the share of turns identical to the float32 answer.
        compile_seconds: compile time of a compiled method: the first warm-up call's seconds over the last
            one's, plus what the engine reported compiling during timed turns (taken out of their wall time);
            None for eager methods and when one warm-up call leaves it unmeasured.
        policy_cost_curve_mismatch: the engine's report when the method's policy was trained on
            another cost curve than the one it ran on (the first turn's that said so); else None.
        policy_drafter_mismatch: likewise when it was trained with another drafter than the one it ran with.
        policy_lookup_mismatch: likewise when it was trained with another prompt-lookup branch.
        capped_trees: cycles whose tree the static path lowered to fit its largest bucket, over all turns (None
            when no turn reports it).
    """

    method: str
    questions: int
    turns: int
    new_tokens: int
    wall_time: float
    throughput: float
    speedup: float | None
    median_speedup: float | None
    mean_accepted_tokens: float | None
    mean_accepted_tokens_source: str | None
    identical: bool | None
    mismatched_turns: int
    time_split: dict[str, float] | None
    accepted_length_histogram: list[int] | None
    mean_draft_depth: float | None = None
    mean_verified_tokens: float | None = None
    speedup_vs_stock: float | None = None
    reference: str = REFERENCE_METHOD
    fp32_agreement: float | None = None
    fp32_identical_share: float | None = None
    compile_seconds: float | None = None
    policy_cost_curve_mismatch: str | None = None
    policy_drafter_mismatch: str | None = None
    policy_lookup_mismatch: str | None = None
    capped_trees: int | None = None


def summarize(
    records: list[QuestionRecord],
    reference: str = REFERENCE_METHOD,
    warmup_seconds: dict[str, list[list[float]]] | None = None,
) -> dict[str, MethodSummary]:
    """Summaries keyed by method, in first-seen order; speedups are None without the reference's records."""
    by_method: dict[str, list[QuestionRecord]] = {}
    for record in records:
        by_method.setdefault(record.method, []).append(record)
    stock = _by_question(by_method.get(REFERENCE_METHOD, []))
    baseline = _by_question(by_method.get(reference, []))
    summaries = {}
    for method, group in by_method.items():
        summary = _summarize_method(method, group, baseline)
        summary.reference = reference
        summary.speedup_vs_stock = _speedup(group, stock)
        summary.compile_seconds = _compile_seconds(group, (warmup_seconds or {}).get(method))
        summaries[method] = summary
    return summaries


def _by_question(records: list[QuestionRecord]) -> dict[int | str, QuestionRecord]:
    return {record.question_id: record for record in records}


def _speedup(records: list[QuestionRecord], baseline: dict[int | str, QuestionRecord]) -> float | None:
    """Tokens/s over the baseline's, both totalled over the questions both ran: a question the baseline lacks
    must not count on one side only (its tokens/s would be set against another question set's)."""
    paired = [record for record in records if record.question_id in baseline]
    base_throughput = _throughput([turn for record in paired for turn in baseline[record.question_id].turns])
    throughput = _throughput([turn for record in paired for turn in record.turns])
    return throughput / base_throughput if base_throughput > 0 else None


def _compile_seconds(records: list[QuestionRecord], warmup: list[list[float]] | None) -> float | None:
    """Compile time of a compiled method: per cache length warmed up, the first warm-up call's time over the
    last's, plus what the engine reported compiling during timed turns. None for a method that compiled
    nothing, and when a single warm-up call per length leaves the compile unmeasured."""
    in_run = sum(turn.compile_time or 0.0 for record in records for turn in record.turns)
    if warmup and any(len(calls) < 2 for calls in warmup):
        return None
    before = sum(max(calls[0] - calls[-1], 0.0) for calls in warmup or [])
    return before + in_run if warmup or in_run else None


def _summarize_method(
    method: str, records: list[QuestionRecord], baseline: dict[int | str, QuestionRecord]
) -> MethodSummary:
    turns = [turn for record in records for turn in record.turns]
    ratios = _per_question_speedups(records, baseline)
    tau, tau_source = _mean_accepted_tokens(turns)
    reported = all(turn.accepted_lengths is not None for turn in turns)
    compared = [turn for turn in turns if turn.fp32_agreement is not None]  # both fp32 fields over the same turns
    agreements = [turn.fp32_agreement for turn in compared]
    return MethodSummary(
        method=method,
        questions=len(records),
        turns=len(turns),
        new_tokens=sum(turn.new_tokens for turn in turns),
        wall_time=sum(turn.wall_time for turn in turns),
        throughput=_throughput(turns),
        speedup=_speedup(records, baseline),
        median_speedup=statistics.median(ratios) if ratios else None,
        mean_accepted_tokens=tau,
        mean_accepted_tokens_source=tau_source,
        identical=None if any(turn.identical is None for turn in turns) else all(turn.identical for turn in turns),
        mismatched_turns=sum(turn.identical is False for turn in turns),
        time_split=_time_split(turns),
        accepted_length_histogram=_histogram(turns) if reported and turns else None,
        mean_draft_depth=_cycle_mean(turns, "draft_depths"),
        mean_verified_tokens=_cycle_mean(turns, "verified_tokens"),
        fp32_agreement=sum(agreements) / len(agreements) if agreements else None,
        fp32_identical_share=sum(bool(turn.fp32_identical) for turn in compared) / len(compared) if compared else None,
        **{report: next(filter(None, (getattr(t, report) for t in turns)), None) for report in POLICY_FIT_REPORTS},
        capped_trees=_sum_reported(turns, "capped_trees"),
    )


def _sum_reported(turns: list[TurnRecord], field: str) -> int | None:
    """The sum of a per-turn count over the turns that report it (None when none does)."""
    values = [getattr(turn, field) for turn in turns if getattr(turn, field) is not None]
    return sum(values) if values else None


def _cycle_mean(turns: list[TurnRecord], field: str) -> float | None:
    """Mean over all cycles of a per-cycle list (None unless every turn reports it)."""
    values = [getattr(turn, field) for turn in turns]
    if not values or any(v is None for v in values):
        return None
    flat = [x for v in values for x in v]
    return sum(flat) / len(flat) if flat else None


def _throughput(turns: list[TurnRecord]) -> float:
    """Total tokens over total time (a ratio of sums, not a mean of ratios)."""
    seconds = sum(turn.wall_time for turn in turns)
    return sum(turn.new_tokens for turn in turns) / seconds if seconds > 0 else 0.0


def _per_question_speedups(records: list[QuestionRecord], baseline: dict[int | str, QuestionRecord]) -> list[float]:
    ratios = []
    for record in records:
        base = baseline.get(record.question_id)
        base_throughput = _throughput(base.turns) if base is not None else 0.0
        if base_throughput > 0:
            ratios.append(_throughput(record.turns) / base_throughput)
    return ratios


def _mean_accepted_tokens(turns: list[TurnRecord]) -> tuple[float | None, str | None]:
    if turns and all(turn.accepted_lengths is not None for turn in turns):
        cycles = sum(len(turn.accepted_lengths) for turn in turns)
        accepted = sum(sum(turn.accepted_lengths) for turn in turns)
        return ((cycles + accepted) / cycles, "speculation_stats") if cycles else (None, None)
    if turns and all(turn.target_passes is not None for turn in turns):
        passes = sum(turn.target_passes for turn in turns)
        return (sum(turn.new_tokens for turn in turns) / passes, "target_passes") if passes else (None, None)
    return None, None


def _time_split(turns: list[TurnRecord]) -> dict[str, float] | None:
    if not turns or any(turn.draft_time is None for turn in turns):
        return None
    split = {
        "draft": sum(turn.draft_time for turn in turns),
        "verify": sum(turn.verify_time for turn in turns),
        "policy": sum(turn.policy_time for turn in turns),
    }
    split["other"] = sum(turn.wall_time for turn in turns) - sum(split.values())
    return split


def _histogram(turns: list[TurnRecord]) -> list[int]:
    counts = Counter(length for turn in turns for length in turn.accepted_lengths)
    return [counts.get(length, 0) for length in range(max(counts, default=-1) + 1)]
