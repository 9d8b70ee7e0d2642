"""``PPOWConfig``: the training arguments of the PPOW trainer (TRL conventions and field names)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...core.values import check_number
from ..config import SpecTrainingArguments
from ..warmup import carry_warmup_ratio

#: the paper's drafter cost ``c`` in the reward ``L / (1 + cL)`` (Table A.3)
DEFAULT_RELATIVE_COST = 0.12


@dataclass
class PPOWConfig(SpecTrainingArguments):
    r"""Arguments of :class:`PPOWTrainer` on top of ``transformers.TrainingArguments``.

    Defaults are the paper's (Table A.3): windows of 10 tokens, groups of 8, clip 0.2, KL
    coefficient 0.03, relative cost 0.12, proximity tolerance 0.5 and scale 1.0, hard-window
    curriculum 0.2 / 0.4 / 0.6, warm-up 5%. Field names follow TRL's GRPO (``num_generations``,
    ``epsilon``, ``beta``, ``num_iterations``, ``temperature``).

    Args:
        window_size: ``W``, tokens per speculative window.
        num_generations: ``G``, windows sampled per prefix (one group).
        num_prefixes: prefixes per conversation in a batch.
        epsilon: clip range of the policy ratio.
        beta: coefficient of ``KL(drafter ‖ target)``, averaged over window tokens.
        relative_cost: ``c`` of the Cost-Aware Speedup Reward ``L / (1 + cL)``, at least 0 (unset: 0.12, the
            paper's, unless ``hardware_profile`` measures it; giving both is refused, as one would be ignored).
        hardware_profile: a ``hf-adaptive-spec profile`` JSON; when set, ``c`` is its draft-step
            time over its one-token verification time (measured instead of assumed). A profile that
            timed another target or drafter than the ones trained is refused.
        use_proximity_reward: add the Distribution-Based Proximity Reward to windows with ``L = 0``.
        proximity_tolerance: ``δ``, per-token log-likelihood gap at which the proximity reward is 0.
        proximity_scale: ``η``, the proximity reward of a window as likely as the target's greedy one.
        use_adaw: choose prefixes with Adaptive Divergence-Aware Windowing (else uniformly).
        hard_window_schedule: share of ADAW's hardest windows per prefix in successive equal phases.
        acceptance: ``sampling`` (rejection sampling, temperature 1) or ``greedy`` (the target's argmax).
        temperature: sampling temperature of the drafter policy.
        num_iterations: optimizer steps per rollout (GRPO's μ); batches drawn while a rollout is
            reused are not used.
        max_length: tokens kept per conversation.
    """

    window_size: int = field(default=10, metadata={"help": "Tokens per speculative window (W)."})
    num_generations: int = field(default=8, metadata={"help": "Windows sampled per prefix (group size G)."})
    num_prefixes: int = field(default=4, metadata={"help": "Prefixes per conversation in a batch."})
    epsilon: float = field(default=0.2, metadata={"help": "Clip range of the policy ratio."})
    beta: float = field(default=0.03, metadata={"help": "Coefficient of KL(drafter || target)."})
    relative_cost: float | None = field(
        default=None,
        metadata={"help": "Drafter cost c >= 0 in the reward L / (1 + cL) (default 0.12; not with hardware_profile)."},
    )
    hardware_profile: str | None = field(
        default=None,
        metadata={
            "help": "Profile JSON of this target and drafter; c = draft step time / one-token verification time."
        },
    )
    use_proximity_reward: bool = field(default=True, metadata={"help": "Proximity reward for windows with L = 0."})
    proximity_tolerance: float = field(default=0.5, metadata={"help": "Per-token log-likelihood gap (delta)."})
    proximity_scale: float = field(default=1.0, metadata={"help": "Scale of the proximity reward (eta)."})
    use_adaw: bool = field(default=True, metadata={"help": "Adaptive Divergence-Aware Windowing."})
    hard_window_schedule: list[float] = field(
        default_factory=lambda: [0.2, 0.4, 0.6], metadata={"help": "Share of hard windows per training phase."}
    )
    acceptance: str = field(
        default="sampling", metadata={"help": "Verification rule.", "choices": ["sampling", "greedy"]}
    )
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the drafter policy."})
    num_iterations: int = field(default=1, metadata={"help": "Optimizer steps per rollout (mu)."})
    max_length: int = field(default=768, metadata={"help": "Tokens kept per conversation."})
    learning_rate: float = field(default=1e-5, metadata={"help": "Peak AdamW learning rate."})
    warmup_ratio: float = field(default=0.05, metadata={"help": "Share of steps spent warming up."})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "Learning-rate schedule."})
    max_grad_norm: float = field(default=0.5, metadata={"help": "Gradient clipping norm."})
    logging_steps: float = field(default=10, metadata={"help": "Log every X update steps."})
    remove_unused_columns: bool = field(default=False, metadata={"help": "Keep loss_mask for prefix selection."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on CPU (set False on an accelerator)."})

    def __post_init__(self):
        carry_warmup_ratio(self)
        super().__post_init__()
        if self.num_generations < 2:
            raise ValueError("num_generations must be at least 2: advantages are relative within a group.")
        if self.window_size < 1 or self.num_prefixes < 1 or self.num_iterations < 1:
            raise ValueError("window_size, num_prefixes and num_iterations must be positive.")
        if not self.hard_window_schedule or not all(0.0 <= share <= 1.0 for share in self.hard_window_schedule):
            raise ValueError(f"hard_window_schedule must hold shares in [0, 1], got {self.hard_window_schedule}.")
        # each would turn the loss or the reward into NaN (a division by 0) or a silently other objective
        for name in ("temperature", "epsilon", "proximity_tolerance"):
            if not getattr(self, name) > 0:
                raise ValueError(f"PPOWConfig.{name} must be > 0, got {getattr(self, name)!r}.")
        self._check_reward_settings()
        if self.acceptance not in ("sampling", "greedy"):
            raise ValueError(f"PPOWConfig.acceptance must be 'sampling' or 'greedy', got {self.acceptance!r}.")

    def _check_reward_settings(self) -> None:
        """The reward's and the loss's numbers, and the window and length, where a value the paper never meant
        would train a silently other objective (a negative cost makes ``L / (1 + cL)`` infinite or negative)."""
        owner = "PPOWConfig"
        if self.relative_cost is not None and self.hardware_profile:
            raise ValueError(
                f"{owner}: relative_cost={self.relative_cost} and hardware_profile={self.hardware_profile!r} both set "
                "the reward's drafter cost c, and the profile's would replace the argument: pass one of them."
            )
        if self.relative_cost is not None:
            check_number(owner, "relative_cost", self.relative_cost, at_least=0, below=math.inf,
                         meaning="the drafter's cost c in L / (1 + cL)")
        check_number(owner, "beta", self.beta, at_least=0, below=math.inf, meaning="the KL coefficient")
        check_number(owner, "proximity_scale", self.proximity_scale, at_least=0, below=math.inf,
                     meaning="the proximity reward's eta")
        check_number(owner, "window_size", self.window_size, at_least=1, integer=True, meaning="tokens per window")
        check_number(owner, "max_length", self.max_length, at_least=2, integer=True,
                     meaning="tokens kept per conversation")

    @property
    def drafter_cost(self) -> float:
        """``relative_cost``, or the paper's 0.12 when it is unset (a ``hardware_profile`` measures it instead)."""
        return DEFAULT_RELATIVE_COST if self.relative_cost is None else self.relative_cost
