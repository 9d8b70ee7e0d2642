"""``DVIOnlineLearnerConfig``: every weight, length and rate of DVI's online learning, in one place."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.values import check_flag, check_number

#: the file that held the drafter's split point before adapters wrote ``config.json`` (still read).
DVI_CONFIG_NAME = "dvi_config.json"
#: ``artifact_type`` of a DVI adapter's ``config.json``.
DVI_ARTIFACT_TYPE = "hf_adaptive_spec.drafter.dvi"
#: the module of the draft head that carries the LoRA adapter.
DRAFT_HEAD_MODULE = "draft_head"


@dataclass
class DVIOnlineLearnerConfig:
    r"""How a :class:`DVIDrafter` learns from its own accept/reject outcomes ("Improve").

    The loss of one update over records sampled from the buffer is

    .. math::
        \lambda_{kl}(t)\,\mathrm{KL}(p_\theta \| \mathrm{softmax}(z_\phi/\tau))
        + \lambda_{ce}(t)\,\mathrm{CE}_{r=1}
        + \lambda_{pg}(t)\,\mathbb{E}_{\text{fresh}}[-(r-b)\log p_\theta(a)]
        - w_{ent}\,H[p_\theta]

    with the KL→RL schedule of the paper (Sec. 3.4): for ``t < warmup_updates`` only the KL
    term (weight ``kl_weight``); over the next ``ramp_updates`` the CE and PG weights grow
    linearly to ``ce_weight`` / ``pg_weight`` while the KL weight decays to ``kl_weight_min``.
    ``b`` is an exponential moving average of the rewards of fresh records.

    The paper (Bhansali & Heck, "Draft, Verify, & Improve") fixes the structure but gives no
    numeric values for these knobs except its budget (one update per prompt, 2,000 prompts,
    proposal depth 4, see ``DVIConfig``); the defaults below are ours and marked so.

    Args:
        buffer_size: records kept in the rollout buffer (oldest dropped first).
        update_every: fresh records between two automatic updates during ``generate``; 0
            disables automatic updates (call :meth:`DVIDrafter.update` yourself, as the
            trainer does once per prompt).
        batch_size: records per update, sampled uniformly from the buffer (KL and CE terms);
            the policy-gradient term uses the at most ``batch_size`` freshest records logged
            since the previous update (on-policy).
        learning_rate: AdamW learning rate of the LoRA parameters.
        weight_decay: AdamW weight decay.
        adam_beta1: AdamW beta1.
        adam_beta2: AdamW beta2.
        adam_epsilon: AdamW epsilon.
        max_grad_norm: gradient clipping norm (0 disables clipping).
        kl_temperature: ``tau`` of the target distribution ``softmax(target_logits / tau)``.
        kl_weight: KL weight during warm-up (``lambda_0``).
        kl_weight_min: KL weight floor after the ramp (``lambda_kl^min``).
        ce_weight: weight of the reward-masked cross-entropy after the ramp (the paper's
            ``lambda_pg^max`` on its reward-masked term).
        pg_weight: weight of the on-policy policy-gradient term after the ramp (``w_rl``).
        entropy_weight: entropy bonus ``w_ent`` (subtracted from the loss).
        warmup_updates: KL-only updates before the ramp (``T_warmup``).
        ramp_updates: updates over which CE/PG ramp in and KL decays (``T_ramp``).
        baseline_decay: EMA decay of the reward baseline ``b``.
        seed: seed of the buffer sampling and of the LoRA dropout masks (a private generator: the global RNG is
            untouched).
    """

    buffer_size: int = field(default=4096, metadata={"help": "Records kept in the rollout buffer (ours)."})
    update_every: int = field(
        default=64, metadata={"help": "Fresh records between automatic updates; 0 = only explicit update() (ours)."}
    )
    batch_size: int = field(default=64, metadata={"help": "Records per update (ours)."})
    learning_rate: float = field(default=5e-4, metadata={"help": "AdamW learning rate of the LoRA weights (ours)."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    adam_beta1: float = field(default=0.9, metadata={"help": "AdamW beta1."})
    adam_beta2: float = field(default=0.999, metadata={"help": "AdamW beta2."})
    adam_epsilon: float = field(default=1e-8, metadata={"help": "AdamW epsilon."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping norm; 0 disables it (ours)."})
    kl_temperature: float = field(default=1.0, metadata={"help": "tau in softmax(target_logits / tau)."})
    kl_weight: float = field(default=1.0, metadata={"help": "KL weight during warm-up, lambda_0 (ours)."})
    kl_weight_min: float = field(default=0.1, metadata={"help": "KL weight floor after the ramp (ours)."})
    ce_weight: float = field(default=1.0, metadata={"help": "Reward-masked CE weight after the ramp (ours)."})
    pg_weight: float = field(default=0.1, metadata={"help": "Policy-gradient weight after the ramp (ours)."})
    entropy_weight: float = field(default=0.0, metadata={"help": "Entropy bonus weight (ours)."})
    warmup_updates: int = field(default=200, metadata={"help": "KL-only updates before the ramp, T_warmup (ours)."})
    ramp_updates: int = field(default=300, metadata={"help": "Updates of the KL->RL ramp, T_ramp (ours)."})
    baseline_decay: float = field(default=0.9, metadata={"help": "EMA decay of the reward baseline (ours)."})
    seed: int = field(default=0, metadata={"help": "Seed of the buffer sampling and dropout masks."})

    def __post_init__(self) -> None:
        check_online_learner_values(vars(self))
        object.__setattr__(self, "_learner_built", False)

    def __setattr__(self, name: str, value: Any) -> None:
        """A value set after construction is checked as the constructor checks it, and a field the learner read
        when it was built (:data:`BUILT_WITH`) is refused once a learner holds this config: a later value would be
        saved with the adapter while the learner kept the old one."""
        if "_learner_built" not in vars(self):  # the dataclass's __init__
            object.__setattr__(self, name, value)
            return
        if name in BUILT_WITH and self._learner_built:
            raise AttributeError(
                f"DVIOnlineLearnerConfig.{name} is read once, when the online learner is built (its optimizer, "
                f"buffer or generator), and this config's learner is built: set it before DVIDrafter(online=True, "
                "online_config=...) or enable_online(config), or pass a new config to enable_online (which starts "
                "a new learner)" + (
                    "; to change the learning rate of a running learner, set "
                    "drafter.updater.optimizer.param_groups[0]['lr']" if name == "learning_rate" else "") + "."
            )
        check_online_learner_values({**vars(self), name: value})
        object.__setattr__(self, name, value)

    def __getstate__(self) -> dict[str, Any]:
        """A copy is a config no learner holds yet."""
        return {**vars(self), "_learner_built": False}

    def mark_learner_built(self) -> None:
        """Called by the learner that reads this config's :data:`BUILT_WITH` fields."""
        object.__setattr__(self, "_learner_built", True)


#: the fields of :class:`DVIOnlineLearnerConfig` the online learner reads once, when it is built
BUILT_WITH = ("buffer_size", "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "seed")


#: the fields of :class:`DVIOnlineLearnerConfig` that define the KL->RL schedule (what a saved position means)
SCHEDULE_FIELDS = ("kl_weight", "kl_weight_min", "ce_weight", "pg_weight", "warmup_updates", "ramp_updates")
_NON_NEGATIVE = (
    "update_every", "weight_decay", "max_grad_norm", "kl_weight", "kl_weight_min", "ce_weight", "pg_weight",
    "entropy_weight", "warmup_updates", "ramp_updates",
)


def check_online_learner_values(
    values: dict[str, Any], name_of: Callable[[str], str] = "DVIOnlineLearnerConfig.{}".format
) -> None:
    """Refuse values of :class:`DVIOnlineLearnerConfig`'s fields that no online learner can run with.

    ``name_of`` turns a field into the name the user set it by: a config built by ``DVIConfig`` is refused
    under the trainer's flag (``update_batch_size`` for ``batch_size``), before the target is loaded.
    """
    owner = "DVI's online learner"
    for name in ("buffer_size", "batch_size"):  # a float failed inside the buffer, a bool counted as 1
        check_number(owner, name_of(name), values[name], at_least=1, integer=True)
    check_number(owner, name_of("seed"), values["seed"], at_least=0, integer=True,
                 meaning="the seed of the buffer sampling and dropout masks")
    # inf passed `> 0` and turned the adapter to NaN at the first update
    check_number(owner, name_of("learning_rate"), values["learning_rate"], above=0, below=math.inf,
                 meaning="AdamW's learning rate")
    check_number(owner, name_of("kl_temperature"), values["kl_temperature"], above=0, below=math.inf,
                 meaning="tau of softmax(target_logits / tau)")
    check_number(owner, name_of("adam_epsilon"), values["adam_epsilon"], at_least=0, below=math.inf,
                 meaning="AdamW's epsilon")
    for name in _NON_NEGATIVE:  # NaN passes `< 0`: each is checked as a number
        counted = name in ("update_every", "warmup_updates", "ramp_updates")
        check_number(owner, name_of(name), values[name], at_least=0,
                     below=None if counted else math.inf, integer=counted)
    for name in ("adam_beta1", "adam_beta2"):
        check_number(owner, name_of(name), values[name], at_least=0, below=1, meaning="AdamW's moment decay")
    if not 0.0 <= values["baseline_decay"] < 1.0:
        raise ValueError(f"{name_of('baseline_decay')} must be in [0, 1), got {values['baseline_decay']!r}.")
    if values["kl_weight_min"] > values["kl_weight"]:
        raise ValueError(
            f"{name_of('kl_weight_min')} must not exceed {name_of('kl_weight')} (the KL weight decays to it)."
        )


def check_online_arguments(online: object, online_config: object) -> None:
    """Refuse ``online`` unless a bool, ``online_config`` unless a :class:`DVIOnlineLearnerConfig` (its dict form
    failed inside the learner), and an ``online_config`` with ``online=False``, which no learner would read."""
    check_flag("DVIDrafter", "online", online)
    if online_config is None:
        return
    if not isinstance(online_config, DVIOnlineLearnerConfig):
        raise ValueError(
            f"DVIDrafter: online_config must be a DVIOnlineLearnerConfig, got {online_config!r}: pass "
            "DVIOnlineLearnerConfig(...) (DVIOnlineLearnerConfig(**settings) for a dict of them)."
        )
    if not online:
        raise ValueError(
            "DVIDrafter: online_config sets the online learner, and online=False learns nothing, so it would be "
            "ignored: pass online=True with it, or drop online_config."
        )
