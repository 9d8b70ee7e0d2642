"""Reinforcement-learning pieces shared by the trainers."""

from .grpo import group_relative_advantages
from .ppo import PPOLoss, RolloutBatch, check_ppo_settings, clipped_surrogate, gae, minibatches, ppo_loss

__all__ = [
    "PPOLoss", "RolloutBatch", "check_ppo_settings", "clipped_surrogate", "gae", "group_relative_advantages",
    "minibatches", "ppo_loss",
]
