"""Group-relative advantages (GRPO's): rewards normalised within groups sampled for one context."""

from __future__ import annotations

import torch


def group_relative_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4) -> torch.Tensor:
    """``(r_i − mean_group) / (std_group + eps)`` for consecutive groups of ``group_size`` rewards.

    ``rewards`` is ``[num_groups * group_size]``; the standard deviation is the unbiased one, as in
    TRL's GRPO. A group whose rewards are all equal gets zero advantages.
    """
    if rewards.ndim != 1 or rewards.numel() % group_size:
        raise ValueError(
            f"Expected a flat tensor of whole groups of {group_size} rewards, got shape {tuple(rewards.shape)}."
        )
    if group_size < 2:
        raise ValueError("Group-relative advantages need at least 2 samples per group (num_generations >= 2).")
    groups = rewards.float().view(-1, group_size)
    mean = groups.mean(dim=1, keepdim=True)
    std = groups.std(dim=1, keepdim=True)
    return ((groups - mean) / (std + eps)).reshape(-1)
