"""``LTDConfig``: the training arguments of the LTD policy trainer (TRL conventions)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from transformers import TrainingArguments

from ...core.values import check_number
from ..config import SpecTrainingArguments, check_no_mixed_precision
from ..rl import check_ppo_settings


@dataclass
class LTDConfig(SpecTrainingArguments):
    r"""Arguments of :class:`LTDTrainer` on top of ``transformers.TrainingArguments``.

    One optimizer step is one PPO minibatch update. A rollout of ``n_steps`` decisions of the
    learning head feeds ``ppo_epochs × ⌈n_steps / minibatch_size⌉`` steps (2 by default), so a
    Trainer "epoch" is one rollout. PPO defaults are LTD's (SB3's: learning rate 3e-4, 128
    decisions per rollout, minibatches of 64, one epoch, γ 0.99, λ 0.95, clip 0.2, no entropy
    bonus, value weight 0.5, gradient clipping 0.5, Adam ε 1e-5, constant learning rate).

    The schedule is LTD's collaborative training, in optimizer steps: the size head first, with
    a random depth per cycle; then the depth head, verifying a fixed number of candidates; then
    ``collaborative_rounds`` rounds of (depth head with the greedy size head, size head with the
    greedy depth head). ``max_steps`` defaults to the schedule's length; a smaller value stops early.

    Args:
        n_steps: decisions of the learning head per rollout (whole cycles are replayed; the
            rollout keeps the first ``n_steps`` and bootstraps a cut episode from the critic).
        minibatch_size: decisions per PPO minibatch (one optimizer step).
        ppo_epochs: passes over each rollout.
        gamma: discount across the depth decisions of a cycle (a cycle is one episode).
        gae_lambda: GAE λ.
        clip_range: PPO ratio clipping ε.
        ent_coef: entropy bonus weight.
        vf_coef: value loss weight.
        normalize_advantage: normalise advantages per minibatch.
        reward_scale: a cycle's reward is ``reward_scale × (accepted + 1) / (draft_time + verify_time)``
            (modelled seconds); 0.01 gives tokens per 10 ms, LTD's scale.
        size_warmup_steps: steps of the first phase (size head, uniformly random depth per cycle).
        depth_warmup_steps: steps of the second phase (depth head, fixed verification size).
        warmup_verify_size: candidates verified during the depth warm-up; unset: the policy's
            ``total_tokens - 1`` (LTD: EAGLE-3's 60 on GPUs).
        collaborative_rounds: rounds of (depth phase, size phase) after the warm-ups.
        steps_per_phase: steps of each collaborative phase.
    """

    n_steps: int = field(default=128, metadata={"help": "Decisions of the learning head per rollout (SB3 n_steps)."})
    minibatch_size: int = field(default=64, metadata={"help": "Decisions per PPO minibatch = one optimizer step."})
    ppo_epochs: int = field(default=1, metadata={"help": "Passes over each rollout (SB3 n_epochs)."})
    gamma: float = field(default=0.99, metadata={"help": "Discount across a cycle's depth decisions."})
    gae_lambda: float = field(default=0.95, metadata={"help": "GAE lambda."})
    clip_range: float = field(default=0.2, metadata={"help": "PPO ratio clipping epsilon."})
    ent_coef: float = field(default=0.0, metadata={"help": "Entropy bonus weight."})
    vf_coef: float = field(default=0.5, metadata={"help": "Value loss weight."})
    normalize_advantage: bool = field(default=True, metadata={"help": "Normalise advantages per minibatch."})
    reward_scale: float = field(
        default=0.01, metadata={"help": "Reward = reward_scale * (accepted + 1) / modelled cycle seconds."}
    )
    size_warmup_steps: int = field(default=400, metadata={"help": "Phase 1: size head, random depth per cycle."})
    depth_warmup_steps: int = field(default=400, metadata={"help": "Phase 2: depth head, fixed verification size."})
    warmup_verify_size: int | None = field(
        default=None, metadata={"help": "Candidates verified in phase 2; unset: the policy's total_tokens - 1."}
    )
    collaborative_rounds: int = field(
        default=2, metadata={"help": "Rounds of (depth phase, size phase) after the warm-ups."}
    )
    steps_per_phase: int = field(default=200, metadata={"help": "Optimizer steps of each collaborative phase."})
    learning_rate: float = field(default=3e-4, metadata={"help": "Adam learning rate (LTD / SB3: 3e-4)."})
    lr_scheduler_type: str = field(default="constant", metadata={"help": "Learning-rate schedule."})
    adam_epsilon: float = field(default=1e-5, metadata={"help": "Adam epsilon (SB3: 1e-5)."})
    max_grad_norm: float = field(default=0.5, metadata={"help": "Gradient clipping norm (SB3: 0.5)."})
    logging_steps: float = field(default=10, metadata={"help": "Log every X optimizer steps."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on CPU (the policies are small MLPs)."})
    ddp_find_unused_parameters: bool | None = field(
        default=True, metadata={"help": "Needed under DDP: only one head trains in each phase."}
    )

    def __post_init__(self) -> None:
        for name in ("n_steps", "minibatch_size", "ppo_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"LTDConfig.{name} must be >= 1, got {getattr(self, name)}.")
        check_ppo_settings("LTDConfig", self.clip_range, self.gamma, self.gae_lambda)
        check_number("LTDConfig", "reward_scale", self.reward_scale, above=0, below=math.inf)
        check_number("LTDConfig", "vf_coef", self.vf_coef, at_least=0, below=math.inf, meaning="the value loss's")
        # a negative count shortened the schedule the phases were not built from: the depth head never trained
        check_number("LTDConfig", "collaborative_rounds", self.collaborative_rounds, at_least=0, integer=True)
        if self.warmup_verify_size is not None and self.warmup_verify_size < 0:
            raise ValueError(f"LTDConfig.warmup_verify_size must be >= 0, got {self.warmup_verify_size}.")
        if self.gradient_accumulation_steps != 1:
            raise ValueError(
                "LTDConfig: gradient_accumulation_steps must be 1 (one optimizer step per PPO minibatch); "
                "set minibatch_size to change the update size."
            )
        for name in ("size_warmup_steps", "depth_warmup_steps", "steps_per_phase"):
            steps = getattr(self, name)
            if steps < 0 or steps % self.updates_per_rollout:
                raise ValueError(
                    f"LTDConfig.{name}={steps} must be a non-negative multiple of the updates per rollout "
                    f"(ppo_epochs x ceil(n_steps / minibatch_size) = {self.updates_per_rollout}), so that no rollout "
                    "straddles two phases."
                )
        if self.schedule_steps == 0:
            raise ValueError("LTDConfig: the schedule is empty; give some phase a positive number of steps.")
        if self.max_steps <= 0:
            self.max_steps = self.schedule_steps
        elif self.max_steps > self.schedule_steps:
            raise ValueError(
                f"LTDConfig: max_steps={self.max_steps} exceeds the schedule ({self.schedule_steps} steps); leave "
                "max_steps unset or raise collaborative_rounds / steps_per_phase."
            )
        default_batch = TrainingArguments.__dataclass_fields__["per_device_train_batch_size"].default
        if self.per_device_train_batch_size != default_batch:
            raise ValueError(
                f"LTDConfig.per_device_train_batch_size={self.per_device_train_batch_size} would not be used: one "
                "optimizer step is one PPO minibatch of minibatch_size decisions from the policy's own rollouts. Set "
                f"minibatch_size instead, and leave per_device_train_batch_size at {default_batch}."
            )
        super().__post_init__()
        check_no_mixed_precision(self, "LTDTrainer's training step replays the rollouts with the policy")

    @property
    def updates_per_rollout(self) -> int:
        """Optimizer steps fed by one rollout: ``ppo_epochs × ⌈n_steps / minibatch_size⌉``."""
        return self.ppo_epochs * math.ceil(self.n_steps / self.minibatch_size)

    @property
    def schedule_steps(self) -> int:
        """Optimizer steps of the whole collaborative schedule."""
        return self.size_warmup_steps + self.depth_warmup_steps + 2 * self.collaborative_rounds * self.steps_per_phase
