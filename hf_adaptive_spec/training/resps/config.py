"""``ReSpSConfig``: the training arguments of the Re-SpS policy trainer (TRL conventions)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

from transformers.trainer_utils import SaveStrategy

from ...core.values import check_number
from ...policies.resps import ACTION_GRIDS, action_grid
from ..config import SpecTrainingArguments
from ..rl import check_ppo_settings


@dataclass
class ReSpSConfig(SpecTrainingArguments):
    r"""Arguments of :class:`ReSpSTrainer` on top of ``transformers.TrainingArguments``.

    Defaults are the paper's max-entropy PPO (its Table 4, Stable-Baselines3 defaults otherwise):
    learning rate 3e-4, 64 decisions per rollout, 4 epochs of minibatches of 32, clip 0.2,
    gamma 0.95, GAE lambda 0.9, value coefficient 0.5, entropy coefficient 0.1, gradient
    clipping 0.5, Adam epsilon 1e-5, constant learning rate.

    One optimizer step is one PPO minibatch (``per_device_train_batch_size`` decisions), so an
    update (a rollout of ``n_steps`` decisions per process) takes :attr:`steps_per_update` steps,
    and ``max_steps`` sets the run's length. With several processes each replays its own share
    of the prompts and the gradients are averaged.

    Args:
        n_steps: decisions (PPO transitions) collected per process before each update.
        ppo_epochs: passes over each rollout.
        gamma: discount between consecutive decisions of a generation.
        gae_lambda: GAE's lambda.
        clip_range: PPO's ratio clipping epsilon.
        vf_coef: weight of the value loss.
        ent_coef: weight of the entropy bonus (the paper's max-entropy PPO: 0.1; standard: 0.01).
        normalize_advantages: standardise advantages per minibatch.
        independent_decisions: every decision is a one-step episode (the reference code's
            choice): a tree shape changes the speed, not the generated text, so it does not
            change later states. gamma and gae_lambda then have no effect. False: one episode per
            generation, with gamma and gae_lambda.
        decision_seconds: time charged to a cycle where the policy decides, in replayed rewards;
            unset: measured once at the start (wall-clock median of the policy's decision) and kept in
            checkpoints, so a resumed run keeps it; but two runs with the same seed measure it anew and
            train differently. Set it (e.g. to the value a run's card states) for reproducible runs: the
            rewards are then deterministic. Other cycles are charged nothing.
        action_grid: the policy's action grid, a name in ``ACTION_GRIDS`` ("cpu" or "paper").
        grid_total_tokens / grid_depths / grid_top_ks: set all three for a custom grid,
            ``action_grid(grid_total_tokens, grid_depths, grid_top_ks, grid_paper_filter)``, instead of
            ``action_grid``.
        net_arch: hidden widths of the actor and of the critic.
        training_interval: cycles an action is held while training (the paper: 10).
        decision_interval: cycles an action is held at inference, saved with the policy (the paper: 30).
        inference_temperature: 0: argmax at inference; > 0: sample softmax(logits / T) (the
            reference code: 1.5). Saved with the policy.
    """

    n_steps: int = field(default=64, metadata={"help": "Decisions per process per rollout (paper: 64)."})
    ppo_epochs: int = field(default=4, metadata={"help": "Passes over each rollout (paper: 4)."})
    gamma: float = field(default=0.95, metadata={"help": "Discount between decisions (paper: 0.95)."})
    gae_lambda: float = field(default=0.9, metadata={"help": "GAE lambda (paper: 0.9)."})
    clip_range: float = field(default=0.2, metadata={"help": "PPO ratio clipping (paper: 0.2)."})
    vf_coef: float = field(default=0.5, metadata={"help": "Value loss weight (paper: 0.5)."})
    ent_coef: float = field(default=0.1, metadata={"help": "Entropy bonus weight (paper, max-entropy PPO: 0.1)."})
    normalize_advantages: bool = field(default=True, metadata={"help": "Standardise advantages per minibatch."})
    independent_decisions: bool = field(
        default=True,
        metadata={"help": "Each decision is a one-step episode (reference code); False: one episode per generation."},
    )
    decision_seconds: float | None = field(
        default=None,
        metadata={"help": "Seconds charged per policy decision in replay; unset: measured once (wall clock: set it "
                          "for reproducible runs)."},
    )
    action_grid: str = field(
        default="cpu", metadata={"help": f"Action grid of the policy: one of {', '.join(ACTION_GRIDS)}."}
    )
    grid_total_tokens: list[int] | None = field(default=None, metadata={"help": "Custom grid: total_tokens values."})
    grid_depths: list[int] | None = field(default=None, metadata={"help": "Custom grid: depth values."})
    grid_top_ks: list[int] | None = field(default=None, metadata={"help": "Custom grid: top_k values."})
    grid_paper_filter: bool = field(
        default=True,
        metadata={
            "help": "Custom grid: keep only total_tokens <= top_k^(depth-1) (the paper's filter, no depth-1 trees)."
        },
    )
    net_arch: list[int] = field(
        default_factory=lambda: [128, 128], metadata={"help": "Actor and critic hidden widths."}
    )
    training_interval: int = field(
        default=10, metadata={"help": "Cycles an action is held while training (paper: 10)."}
    )
    decision_interval: int = field(default=30, metadata={"help": "Cycles an action is held at inference (paper: 30)."})
    inference_temperature: float = field(
        default=0.0, metadata={"help": "0: argmax at inference; >0: sample at this temperature (reference: 1.5)."}
    )
    learning_rate: float = field(default=3e-4, metadata={"help": "Adam learning rate (paper: 3e-4)."})
    per_device_train_batch_size: int = field(default=32, metadata={"help": "Decisions per PPO minibatch (paper: 32)."})
    max_grad_norm: float = field(default=0.5, metadata={"help": "Gradient clipping norm (paper: 0.5)."})
    adam_epsilon: float = field(default=1e-5, metadata={"help": "Adam epsilon (Stable-Baselines3: 1e-5)."})
    lr_scheduler_type: str = field(default="constant", metadata={"help": "Learning-rate schedule (paper: constant)."})
    max_steps: int = field(default=1200, metadata={"help": "Optimizer steps (PPO minibatches); must be set."})
    logging_steps: float = field(default=8, metadata={"help": "Log every X steps."})
    save_steps: float = field(
        default=200, metadata={"help": "Checkpoint every X steps: a multiple of steps_per_update."}
    )
    ignore_data_skip: bool = field(
        default=True, metadata={"help": "Must stay True: the replay stream restores its own position on resume."}
    )
    remove_unused_columns: bool = field(default=False, metadata={"help": "Rollout batches are built by the trainer."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on CPU (the policy is a small MLP)."})

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("n_steps", "ppo_epochs"):  # 0 failed as a modulo by zero
            if getattr(self, name) < 1:
                raise ValueError(f"ReSpSConfig.{name} must be >= 1, got {getattr(self, name)}.")
        check_ppo_settings("ReSpSConfig", self.clip_range, self.gamma, self.gae_lambda)
        self._check_policy_settings()
        if self.action_grid not in ACTION_GRIDS:
            raise ValueError(f"action_grid={self.action_grid!r} is unknown; use one of {', '.join(ACTION_GRIDS)}.")
        custom = (self.grid_total_tokens, self.grid_depths, self.grid_top_ks)
        if any(values is not None for values in custom) and not all(values for values in custom):
            raise ValueError("A custom grid needs all of grid_total_tokens, grid_depths and grid_top_ks.")
        if not self.grid():
            raise ValueError("The action grid is empty after the filter: widen the grid_* values.")
        if self.max_steps <= 0:
            raise ValueError(f"Set max_steps (> 0): a step is one PPO minibatch, {self.steps_per_update} per update.")
        if self.gradient_accumulation_steps != 1:
            raise ValueError(
                "A step is one PPO minibatch: keep gradient_accumulation_steps=1, raise per_device_train_batch_size."
            )
        if not self.ignore_data_skip:
            raise ValueError("Keep ignore_data_skip=True: on resume the replay stream restores its own position.")
        self._check_save_steps()
        if self.max_steps % self.steps_per_update:
            whole = self.max_steps - self.max_steps % self.steps_per_update
            warnings.warn(
                f"max_steps={self.max_steps} is no multiple of the {self.steps_per_update} steps of one PPO update "
                f"(ppo_epochs x minibatches of n_steps): training stops inside its last update, after "
                f"{self.max_steps - whole} of its steps, and the checkpoint saved there cannot be resumed. Use "
                f"max_steps={whole or self.steps_per_update} or {whole + self.steps_per_update}.", stacklevel=2,
            )

    def _check_policy_settings(self) -> None:
        """What the policy will be built with and the replay's charges, refused here rather than after the target
        loads (``ReSpSPolicy`` checks the same when it is built)."""
        owner = "ReSpSConfig"
        check_number(owner, "vf_coef", self.vf_coef, at_least=0, below=math.inf, meaning="the value loss's")
        if self.decision_seconds is not None:
            check_number(owner, "decision_seconds", self.decision_seconds, at_least=0, below=math.inf)
        for name in ("training_interval", "decision_interval"):
            check_number(owner, name, getattr(self, name), at_least=1, integer=True, meaning="cycles")
        check_number(owner, "inference_temperature", self.inference_temperature, at_least=0,
                     meaning="0: the argmax action; > 0: sample")
        for name, least in (("net_arch", 1), ("grid_total_tokens", 1), ("grid_depths", 0), ("grid_top_ks", 1)):
            for value in getattr(self, name) or ():  # depth 0: a plain step, an action of its own
                check_number(owner, f"each of {name}", value, at_least=least, integer=True)

    def _check_save_steps(self) -> None:
        """Checkpoints must fall between PPO updates: resuming one taken inside an update would drop the rest of its
        rollout. A ratio (``save_steps < 1``) is checked as the steps ``Trainer`` makes of it,
        ``ceil(max_steps * ratio)``."""
        if self.save_strategy != SaveStrategy.STEPS:
            return
        steps = math.ceil(self.max_steps * self.save_steps) if self.save_steps < 1 else self.save_steps
        if steps % self.steps_per_update:
            given = f"save_steps={self.save_steps}"
            if self.save_steps < 1:
                given += f" (a checkpoint every {steps} of max_steps={self.max_steps} steps)"
            raise ValueError(
                f"{given} must be a multiple of the {self.steps_per_update} steps of one PPO update, so that "
                "checkpoints fall between updates and resuming is exact."
            )

    @property
    def steps_per_update(self) -> int:
        """Optimizer steps of one PPO update: ``ppo_epochs`` passes of minibatches over ``n_steps`` decisions."""
        return self.ppo_epochs * math.ceil(self.n_steps / self.per_device_train_batch_size)

    def grid(self) -> tuple[tuple[int, int, int], ...]:
        """The ``(total_tokens, depth, top_k)`` grid: the custom one if set, else ``ACTION_GRIDS[action_grid]``."""
        if self.grid_total_tokens:
            return action_grid(self.grid_total_tokens, self.grid_depths, self.grid_top_ks, self.grid_paper_filter)
        return ACTION_GRIDS[self.action_grid]

    def policy_kwargs(self) -> dict:
        """``ReSpSPolicy`` keyword arguments set by these training arguments."""
        return {
            "actions": self.grid(),
            "net_arch": tuple(self.net_arch),
            "decision_interval": self.decision_interval,
            "training_interval": self.training_interval,
            "temperature": self.inference_temperature,
        }
