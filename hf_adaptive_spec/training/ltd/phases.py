"""LTD's collaborative training schedule: which head learns when, and what drives the other decision."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...policies.base import CycleState, DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo
from ...policies.ltd import LTDPolicy
from .config import LTDConfig


@dataclass(frozen=True)
class Phase:
    """One phase of the schedule.

    Args:
        learner: the head that samples and learns, ``"depth"`` or ``"size"``.
        steps: optimizer steps of the phase.
        random_depth: the depth is drawn uniformly in ``[1, depth cap]`` each cycle (size warm-up).
        fixed_size: candidates verified each cycle instead of asking the size head (depth warm-up).
    """

    learner: str
    steps: int
    random_depth: bool = False
    fixed_size: int | None = None


def build_schedule(args: LTDConfig, policy: LTDPolicy) -> list[Phase]:
    """The phases of ``args`` in order; phases of zero steps are dropped."""
    fixed = args.warmup_verify_size if args.warmup_verify_size is not None else policy.tree.total_tokens - 1
    phases = [
        Phase("size", args.size_warmup_steps, random_depth=True),
        Phase("depth", args.depth_warmup_steps, fixed_size=fixed),
    ]
    for _ in range(args.collaborative_rounds):
        phases += [Phase("depth", args.steps_per_phase), Phase("size", args.steps_per_phase)]
    return [phase for phase in phases if phase.steps > 0]


def phase_at(phases: list[Phase], step: int) -> tuple[int, Phase]:
    """``(index, phase)`` that optimizer step ``step`` (0-based) belongs to."""
    end = 0
    for index, phase in enumerate(phases):
        end += phase.steps
        if step < end:
            return index, phase
    raise ValueError(f"Step {step} is past the end of the LTD schedule ({end} steps).")


class PhasePolicy(DraftPolicy):
    """The policy a rollout replays: ``policy`` with the learner head sampling and the other
    decision made by its greedy head, or by the warm-up rule of ``phase``."""

    def __init__(self, policy: LTDPolicy, phase: Phase, generator: torch.Generator):
        self.policy = policy
        self.phase = phase
        self.generator = generator
        policy.train()  # the policy and its learner head in train() mode; the other head decides by its argmax
        (policy.size_head if phase.learner == "depth" else policy.depth_head).eval()
        policy.generator = generator

    def check_settings(self) -> None:
        self.policy.check_settings()

    def tree_config(self, state: CycleState) -> TreeConfig:
        tree = self.policy.tree_config(state)
        if not self.phase.random_depth or not tree.depth:  # a lookup-first cycle stays undrafted
            return tree
        return replace(tree, depth=int(torch.randint(1, tree.depth + 1, (1,), generator=self.generator)))

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        return True if self.phase.random_depth else self.policy.continue_drafting(step)

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        return self.policy.num_tokens_to_verify(info) if self.phase.fixed_size is None else self.phase.fixed_size
