"""Re-SpS: a PPO policy choosing the draft tree's shape from the target's EAGLE-3 features."""

from .policy import ACTION_GRIDS, ReSpSDecision, ReSpSPolicy, action_grid, full_tree_size

__all__ = ["ACTION_GRIDS", "ReSpSDecision", "ReSpSPolicy", "action_grid", "full_tree_size"]
