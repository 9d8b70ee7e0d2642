"""LTD (Learning to Draft): PPO-trained depth and verification-size policies (see README.md)."""

from .features import depth_observation, size_action_mask, size_observation
from .policy import ActorCritic, Decision, LTDPolicy

__all__ = ["ActorCritic", "Decision", "LTDPolicy", "depth_observation", "size_action_mask", "size_observation"]
