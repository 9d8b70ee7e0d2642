"""Measurements of one (question, method) pair, as written to the progress file and the JSON report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import BenchError

#: the engine's reports of a policy that does not fit its call (``SpeculationStats``), kept per turn and per method,
#: each with how the markdown report names it
POLICY_FIT_REPORTS = {
    "policy_cost_curve_mismatch": "policy on another cost curve",
    "policy_drafter_mismatch": "policy trained with another drafter",
    "policy_lookup_mismatch": "policy trained with another prompt-lookup branch",
}


@dataclass
class TurnRecord:
    """One timed ``generate`` call.

    Args:
        turn: 0-based turn index.
        new_tokens: tokens generated.
        wall_time: seconds spent in the method's ``generate``.
        identical: whether the tokens equal ``stock``'s for the same turn; None when not
            checked (sampling).
        first_mismatch: index of the first token differing from ``stock``'s, or None.
        target_passes: full-depth target forwards (prefill included), when countable.
        accepted_lengths: accepted draft tokens per cycle, for methods reporting speculation stats.
        draft_depths / verified_tokens: per cycle, the verified tree's depth and size (root
            included), for methods reporting speculation stats.
        draft_time: seconds drafting (speculation stats only); likewise ``verify_time``, ``policy_time``.
        draft_times / verify_times: per cycle, seconds drafting / verifying (speculation stats only; runs
            before 2026-12-02 hold no ``verify_times``): with ``verified_tokens``, the live verification curve.
        output_ids: the generated tokens; kept for ``stock`` (the reference when resuming), and for every
            method with ``--keep_outputs``.
        compile_time: seconds the call spent compiling graphs (reported by the engine), taken out
            of ``wall_time``.
        fp32_agreement: in runs below float32, the fraction of the float32 stock answer's tokens
            produced before the first divergence from it (1.0: identical); None in float32 runs.
        fp32_identical: whether the tokens equal the float32 stock answer; None in float32 runs.
        fp32_reference_ids: the float32 stock answer; kept for ``stock`` only.
        fp32_reference_seconds: seconds the float32 stock answer took (eager ``generate``, timed right after
            ``stock``'s call); kept for ``stock`` only, None in float32 runs and in runs before 2026-12-01.
        policy_cost_curve_mismatch: the engine's report of a policy trained on another cost curve
            than the call's (``SpeculationStats.policy_cost_curve_mismatch``); None otherwise.
        policy_drafter_mismatch: the engine's report of a policy trained with another drafter than the
            call's (``SpeculationStats.policy_drafter_mismatch``); None otherwise.
        capped_trees: cycles whose tree (and prompt-lookup chain) the static path lowered to fit its largest
            verification bucket (``SpeculationStats.capped_trees``): the method ran smaller trees than it asked for;
            None for methods without speculation stats and runs before 2026-12-05.
        policy_lookup_mismatch: the engine's report of a policy trained with another prompt-lookup branch than
            the call's (``SpeculationStats.policy_lookup_mismatch``); None otherwise.
    """

    turn: int
    new_tokens: int
    wall_time: float
    identical: bool | None
    first_mismatch: int | None = None
    target_passes: int | None = None
    accepted_lengths: list[int] | None = None
    draft_depths: list[int] | None = None
    verified_tokens: list[int] | None = None
    draft_time: float | None = None
    draft_times: list[float] | None = None
    verify_time: float | None = None
    verify_times: list[float] | None = None
    policy_time: float | None = None
    output_ids: list[int] | None = None
    compile_time: float | None = None
    fp32_agreement: float | None = None
    fp32_identical: bool | None = None
    fp32_reference_ids: list[int] | None = None
    fp32_reference_seconds: float | None = None
    policy_cost_curve_mismatch: str | None = None
    policy_drafter_mismatch: str | None = None
    policy_lookup_mismatch: str | None = None
    capped_trees: int | None = None

    @property
    def throughput(self) -> float:
        """Generated tokens per second."""
        return self.new_tokens / self.wall_time if self.wall_time > 0 else 0.0


@dataclass
class QuestionRecord:
    """All turns of one question decoded by one method; ``session``: which session of its run measured it (0 for
    the first, 1 for the first ``--resume``, ...; None for a record kept without a progress file, or written before
    sessions were numbered)."""

    question_id: int | str
    category: str
    method: str
    turns: list[TurnRecord] = field(default_factory=list)
    session: int | None = None

    @property
    def key(self) -> tuple[int | str, str]:
        """``(question_id, method)``: what resuming skips on."""
        return (self.question_id, self.method)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form; each turn also carries its ``throughput``."""
        data = asdict(self)
        for turn_data, turn in zip(data["turns"], self.turns, strict=True):
            turn_data["throughput"] = turn.throughput
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QuestionRecord:
        """Inverse of :meth:`to_dict`.

        Raises:
            BenchError: when ``data`` is not such a record (a field missing, or one no record has).
        """
        try:
            turns = [TurnRecord(**{k: v for k, v in turn.items() if k != "throughput"}) for turn in data["turns"]]
            if not all(_is_number(turn.new_tokens, int) and _is_number(turn.wall_time, (int, float)) for turn in turns):
                raise TypeError("a turn's new_tokens or wall_time is not a number")
            return cls(data["question_id"], data["category"], data["method"], turns, data.get("session"))
        except (KeyError, TypeError, AttributeError) as error:
            raise BenchError(f"not a bench question record ({type(error).__name__}: {error}); give a file the bench "
                             "wrote, not an edited one") from None


def _is_number(value: Any, kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


#: The float32 stock answers of a run below float32, reported as a method of their own (eager ``generate`` in
#: float32: the peer "eager float32 stock").
FP32_REFERENCE_METHOD = "stock-fp32"


def fp32_reference_records(records: list[QuestionRecord], reference_method: str) -> list[QuestionRecord]:
    """The float32 answers that ``reference_method``'s (``stock``'s) turns timed beside their own, as records of
    :data:`FP32_REFERENCE_METHOD`; none for questions with a turn not timed so (float32 runs, older runs)."""
    derived = []
    for record in records:
        turns = record.turns
        if record.method != reference_method or not turns or any(t.fp32_reference_seconds is None for t in turns):
            continue
        fp32_turns = [
            TurnRecord(
                turn=t.turn, new_tokens=len(t.fp32_reference_ids), wall_time=t.fp32_reference_seconds, identical=None,
                fp32_agreement=1.0, fp32_identical=True,  # the float32 answer itself
            )
            for t in turns
        ]
        derived.append(QuestionRecord(record.question_id, record.category, FP32_REFERENCE_METHOD, fp32_turns,
                                      record.session))  # timed in stock's session, right after its turns
    return derived
