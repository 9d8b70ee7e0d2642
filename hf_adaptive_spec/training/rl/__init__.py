"""Reinforcement-learning pieces shared by the policy trainers."""

from .ppo import PPOLoss, RolloutBatch, gae, minibatches, ppo_loss

__all__ = ["PPOLoss", "RolloutBatch", "gae", "minibatches", "ppo_loss"]
