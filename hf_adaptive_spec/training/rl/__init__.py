"""Reinforcement-learning pieces shared by the policy trainers."""

from .ppo import PPOLoss, RolloutBatch, gae, masked_categorical, minibatches, ppo_loss

__all__ = ["PPOLoss", "RolloutBatch", "gae", "masked_categorical", "minibatches", "ppo_loss"]
