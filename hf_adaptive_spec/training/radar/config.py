"""``RadarConfig``: the training arguments of the RADAR policy trainer (TRL conventions)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...core.values import check_number
from ..config import SpecTrainingArguments


@dataclass
class RadarConfig(SpecTrainingArguments):
    r"""Arguments of :class:`RadarTrainer` on top of ``transformers.TrainingArguments``.

    Defaults are RADAR's (``train_radar.py``): REINFORCE with lr 1e-4, weight decay 1e-4, cosine
    schedule, gradient clipping 1.0, batches of 64, 100 epochs, γ = 0.99. The optimizer is
    ``Trainer``'s AdamW (RADAR: Adam with L2 weight decay). Every epoch the deterministic policy
    is scored on the held-out split and the checkpoint with the best modelled tokens/s is kept.

    Rewards (one episode = one draft cycle): ``-alpha`` per continue decision, and when drafting
    ends after ``k`` calls with ``a`` accepted tokens ``beta * speed``, where
    ``speed = (a + 1) / t(k)`` tokens/s and ``t(k) = T_verify(n_k) + k T_draft + n_p(k) T_policy``
    (``n_k`` tokens verified, ``n_p(k)`` policy calls) comes from the hardware profile.

    Args:
        alpha: penalty per continue decision (RADAR's released Llama-3.1 policy: 0.02).
        beta: weight of the speed reward; unset: ``10 * (T_draft + T_policy)``, RADAR's README
            definition, which makes ``beta * speed`` about the tokens one more draft call costs.
        gamma: discount of the rewards within a cycle.
        policy_step_seconds: ``T_policy``, seconds per policy call; unset: the profile's
            ``policy_call_seconds``.
        count_bonus_token: count the target's bonus token in the speed (``a + 1`` tokens per cycle,
            the real throughput); False reproduces RADAR's ``a / t(k)``.
        reward_baseline: subtract from each return ``G_t`` the batch's mean ``G_t`` over the cycles
            that take decision ``t`` (REINFORCE's variance-reducing baseline; RADAR uses none). Rewards
            that differ by a few percent between actions, as on a CPU, need it.
        entropy_coef: weight of an entropy bonus on the decisions taken (RADAR: 0); keeps a
            rarely rewarded action such as ``SKIP`` explored.
        allow_skip: give a new policy the ``SKIP`` action (verify no drafted token after the first
            draft call: a plain step, rewarded ``beta * (1 + a) / (T_verify(n) + T_draft + T_policy)``,
            ``a`` = 0 and ``n`` = 1 unless a prompt-lookup chain is verified too); needs ``count_bonus_token``.
        lstm_hidden: LSTM width of a new policy.
        mlp_hidden: MLP width of a new policy.
        dropout: MLP dropout of a new policy during training.
    """

    alpha: float = field(default=0.02, metadata={"help": "Penalty per continue decision (RADAR Llama-3.1: 0.02)."})
    beta: float | None = field(
        default=None, metadata={"help": "Weight of the speed reward; unset: 10 * (T_draft + T_policy) (RADAR README)."}
    )
    gamma: float = field(default=0.99, metadata={"help": "Discount of rewards within a cycle."})
    policy_step_seconds: float | None = field(
        default=None, metadata={"help": "Seconds per policy call (T_policy); unset: the profile's policy_call_seconds."}
    )
    count_bonus_token: bool = field(
        default=True, metadata={"help": "Speed counts a + 1 tokens per cycle; False: RADAR's a / t(k)."}
    )
    reward_baseline: bool = field(
        default=False, metadata={"help": "Subtract the batch's mean return per decision (RADAR: no baseline)."}
    )
    entropy_coef: float = field(default=0.0, metadata={"help": "Entropy bonus on the decisions taken (RADAR: 0)."})
    allow_skip: bool = field(
        default=False, metadata={"help": "New policies may skip verification after the first draft call."}
    )
    lstm_hidden: int = field(default=128, metadata={"help": "LSTM width of a new policy."})
    mlp_hidden: int = field(default=128, metadata={"help": "MLP width of a new policy."})
    dropout: float = field(default=0.1, metadata={"help": "MLP dropout of a new policy (training only)."})
    learning_rate: float = field(default=1e-4, metadata={"help": "Peak learning rate (RADAR: 1e-4)."})
    weight_decay: float = field(default=1e-4, metadata={"help": "Weight decay (RADAR: 1e-4)."})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "Learning-rate schedule (RADAR: cosine)."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping norm (RADAR: 1.0)."})
    per_device_train_batch_size: int = field(default=64, metadata={"help": "Cycles per batch (RADAR: 64)."})
    num_train_epochs: float = field(default=100, metadata={"help": "Passes over the training cycles (RADAR: 100)."})
    eval_strategy: str = field(default="epoch", metadata={"help": "When to score the held-out split."})
    save_strategy: str = field(default="epoch", metadata={"help": "When to checkpoint (must match eval_strategy)."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept (the best one always is)."})
    load_best_model_at_end: bool = field(
        default=True, metadata={"help": "End with the checkpoint of the best held-out tokens/s."}
    )
    metric_for_best_model: str | None = field(
        default="tokens_per_second", metadata={"help": "Held-out metric selecting the best checkpoint."}
    )
    greater_is_better: bool | None = field(default=True, metadata={"help": "Higher tokens/s is better."})
    logging_steps: float = field(default=50, metadata={"help": "Log every X update steps."})
    remove_unused_columns: bool = field(default=False, metadata={"help": "Keep every dataset column."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on CPU (the policy is tiny)."})

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}.")
        self._check_reward_and_network()
        if self.allow_skip and not self.count_bonus_token:
            raise ValueError(
                "allow_skip needs count_bonus_token=True: without the bonus token a skipped cycle commits nothing "
                "and the policy could never learn to skip."
            )

    def _check_reward_and_network(self) -> None:
        """The reward's terms (a negative ``alpha`` rewards continuing, a ``beta`` of 0 or below drops or flips the
        speed reward) and a new policy's widths, before the target loads."""
        owner = "RadarConfig"
        check_number(owner, "alpha", self.alpha, at_least=0, below=math.inf, meaning="the penalty per continue")
        if self.beta is not None:
            check_number(owner, "beta", self.beta, above=0, below=math.inf, meaning="the speed reward's weight")
        if self.policy_step_seconds is not None:
            check_number(owner, "policy_step_seconds", self.policy_step_seconds, at_least=0, below=math.inf)
        for name in ("lstm_hidden", "mlp_hidden"):
            check_number(owner, name, getattr(self, name), at_least=1, integer=True, meaning="a layer's width")
        check_number(owner, "dropout", self.dropout, at_least=0, below=1)
