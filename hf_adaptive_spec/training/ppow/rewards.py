"""PPOW's window rewards: the Cost-Aware Speedup Reward and the Distribution-Based Proximity Reward.

The paper's equations did not survive in its text; the forms below are the ones its prose and
tables determine. ``speedup_reward`` reproduces every value of the paper's Table 6
(L = 1..7 → 0.89, 1.60, 2.18, 2.67, 3.08, 3.43, 3.74, to its two decimals, with c = 0.1245).
"""

from __future__ import annotations

import torch


def speedup_reward(accepted: torch.Tensor, relative_cost: float) -> torch.Tensor:
    """Cost-Aware Speedup Reward ``L / (1 + c·L)`` of ``accepted`` prefix lengths ``L``.

    Args:
        accepted: accepted prefix lengths (any shape).
        relative_cost: ``c``, the drafter's cost relative to the target (the paper: 0.12, the
            ratio of non-embedding parameters; or a draft step's time over a target forward).
    """
    accepted = accepted.float()
    return accepted / (1.0 + relative_cost * accepted)


def proximity_reward(
    draft_log_likelihood: torch.Tensor,
    reference_log_likelihood: torch.Tensor,
    window_size: int,
    tolerance: float,
    scale: float,
) -> torch.Tensor:
    """Distribution-Based Proximity Reward ``η · max(0, 1 − Δ/δ)``.

    ``Δ`` is the per-token gap ``max(0, S_ref − S_draft) / W`` between the target's cumulative
    log-likelihood of its own greedy window (``S_ref``) and of the drafted window (``S_draft``), so
    a window as likely under the target as the target's own choice earns ``η`` and one ``δ`` nats
    per token less likely earns nothing.
    """
    gap = (reference_log_likelihood - draft_log_likelihood).clamp(min=0.0) / window_size
    return scale * (1.0 - gap / tolerance).clamp(min=0.0)


def window_rewards(
    accepted: torch.Tensor,
    draft_log_likelihood: torch.Tensor,
    reference_log_likelihood: torch.Tensor,
    *,
    window_size: int,
    relative_cost: float,
    tolerance: float,
    scale: float,
    use_proximity: bool = True,
) -> torch.Tensor:
    """PPOW's reward of each window: the speedup reward, plus the proximity reward only for
    windows of which verification accepted nothing (when ``use_proximity``)."""
    reward = speedup_reward(accepted, relative_cost)
    if use_proximity:
        proximity = proximity_reward(draft_log_likelihood, reference_log_likelihood, window_size, tolerance, scale)
        reward = reward + torch.where(accepted == 0, proximity, torch.zeros_like(proximity))
    return reward
