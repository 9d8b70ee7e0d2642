"""What a replay returns: one :class:`ReplayedCycle` per cycle (the engine's ``CycleFeedback`` with modelled draft and
verify time), gathered per prompt in a :class:`ReplayResult`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..policies.base import CycleFeedback
from ..profiling.hardware import unread_after


@dataclass
class ReplayedCycle:
    """One replayed cycle: the engine's ``CycleFeedback`` fields, with modelled draft and verify time.

    ``draft_depth`` is the depth of the verified (pruned) tree, as in ``SpeculationStats``; the
    draft time counts every level drafted, the first by the committed tokens it reads
    (:meth:`~hf_adaptive_spec.profiling.HardwareProfile.draft_time`). ``accepted_length`` is what verification
    accepted (what the policy observes, as in ``generate``); :attr:`committed_tokens` what the cycle added to the
    generation, which ends at its end-of-sequence token as ``generate`` stops there.
    """

    context_length: int
    draft_depth: int
    verified_tokens: int
    accepted_length: int
    draft_time: float
    verify_time: float
    policy_time: float
    drafter_accepted_length: int
    #: tokens left in the recorded generation at this cycle's start (None: not bounded, e.g. a live cycle)
    remaining_tokens: int | None = None
    #: the drafter's steps (levels drafted before pruning); None for a live cycle's feedback
    draft_levels: int | None = None
    #: committed tokens the drafter had not read when the cycle began (what its first step read if it drafted)
    unread_tokens: int = 1

    @property
    def seconds(self) -> float:
        return self.draft_time + self.verify_time + self.policy_time

    @property
    def drafted(self) -> bool:
        """Whether the drafter ran (and read the committed tokens it had not read)."""
        return self.draft_levels > 0 if self.draft_levels is not None else self.draft_depth > 0

    def unread_after(self) -> int:
        """The committed tokens the drafter has not read when the next cycle begins (``replay_cycle``'s argument)."""
        return unread_after(self.unread_tokens, self.drafted, self.committed_tokens)

    @property
    def committed_tokens(self) -> int:
        """Tokens the cycle added (accepted drafts and the bonus token), none past the generation's end: what
        ``SpeculationStats`` counts and ``generate`` returns."""
        produced = self.accepted_length + 1
        return produced if self.remaining_tokens is None else min(produced, self.remaining_tokens)

    @classmethod
    def from_feedback(cls, feedback: CycleFeedback) -> ReplayedCycle:
        """A live cycle as a replayed one: a cycle that committed fewer tokens than it accepted (the generation
        ended inside its path) had that many tokens left."""
        fields = {
            name: getattr(feedback, name) for name in CycleFeedback.__dataclass_fields__ if name != "committed_tokens"
        }
        cut = feedback.committed_tokens is not None and feedback.committed_tokens < feedback.accepted_length + 1
        return cls(**fields, remaining_tokens=feedback.committed_tokens if cut else None)

    def feedback(self) -> CycleFeedback:
        return CycleFeedback(**{name: getattr(self, name) for name in CycleFeedback.__dataclass_fields__})


def committed_tokens(cycles: Iterable[ReplayedCycle]) -> int:
    """Tokens ``cycles`` added to their generations (see :attr:`ReplayedCycle.committed_tokens`)."""
    return sum(cycle.committed_tokens for cycle in cycles)


@dataclass
class ReplayResult:
    """Replayed cycles of each prompt, with the totals the benchmarks report."""

    cycles: list[list[ReplayedCycle]] = field(default_factory=list)

    @property
    def all_cycles(self) -> list[ReplayedCycle]:
        return [cycle for prompt in self.cycles for cycle in prompt]

    @property
    def mean_accepted_tokens(self) -> float:
        """τ: tokens per cycle, the bonus token included (as ``SpeculationStats``: none past end of sequence)."""
        cycles = self.replayed_cycles()
        return committed_tokens(cycles) / len(cycles)

    @property
    def tokens_per_second(self) -> float:
        cycles = self.replayed_cycles()
        return committed_tokens(cycles) / sum(c.seconds for c in cycles)

    def replayed_cycles(self) -> list[ReplayedCycle]:
        """Every cycle, refused when there is none: no data has no τ or speed (0 would rank as a real figure)."""
        cycles = self.all_cycles
        if not self.cycles:
            raise ValueError(
                "No prompt was replayed: the recording holds none (recorded from no prompts), or none were chosen. "
                "Record prompts with `hf-adaptive-spec record`, or replay the prompts the recording holds."
            )
        if not cycles:
            raise ValueError(
                f"No cycle was replayed on {len(self.cycles)} prompts: the recording holds no positions for them (each "
                "generation ended at its first token). Record with --max-new-tokens >= 2, on prompts whose answer "
                "does not end at once."
            )
        return cycles
