"""The KL→RL schedule of DVI (paper Sec. 3.4): loss-term weights as a function of the update count."""

from __future__ import annotations

from dataclasses import dataclass

from .config import DVIOnlineLearnerConfig


@dataclass(frozen=True)
class LossWeights:
    """Weights of the four loss terms at one update.

    Args:
        kl: weight of ``KL(p_draft || softmax(target_logits / tau))``.
        ce: weight of the reward-masked cross-entropy on accepted records.
        pg: weight of the on-policy policy-gradient term ``-(r - b) log p_draft(a)``.
        entropy: weight of the entropy bonus (subtracted).
    """

    kl: float
    ce: float
    pg: float
    entropy: float


class KLToRLSchedule:
    r"""Warm-up on KL, then a linear ramp to the RL mix.

    With ``rho(t) = clip((t - T_warmup) / T_ramp, 0, 1)`` at update ``t`` (0 for the first):

    - ``kl(t) = kl_weight - rho(t) * (kl_weight - kl_weight_min)``
    - ``ce(t) = rho(t) * ce_weight`` and ``pg(t) = rho(t) * pg_weight``
    - ``entropy(t) = entropy_weight``

    so ``t < T_warmup`` is pure KL, and from ``T_warmup + T_ramp`` on the weights stay at
    ``(kl_weight_min, ce_weight, pg_weight)``. ``T_ramp = 0`` switches at ``T_warmup``.
    """

    def __init__(self, config: DVIOnlineLearnerConfig):
        self.config = config

    def ramp(self, step: int) -> float:
        """``rho(step)``: 0 during warm-up, 1 after the ramp."""
        warmup, length = self.config.warmup_updates, self.config.ramp_updates
        if step < warmup:
            return 0.0
        if length == 0:
            return 1.0
        return min((step - warmup) / length, 1.0)

    def weights(self, step: int) -> LossWeights:
        """The loss weights of update number ``step`` (0-based)."""
        c, rho = self.config, self.ramp(step)
        return LossWeights(
            kl=(1.0 - rho) * c.kl_weight + rho * c.kl_weight_min,
            ce=rho * c.ce_weight,
            pg=rho * c.pg_weight,
            entropy=c.entropy_weight,
        )
