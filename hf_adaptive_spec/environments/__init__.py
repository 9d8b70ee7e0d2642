"""Environments for training draft policies: exact replay of recorded greedy generations."""

from .recording import ReplayRecording, ReplayTree, record_greedy_trees, record_replay
from .replay import ReplayDrafter, ReplayedCycle, ReplayEnvironment, ReplayResult

__all__ = [
    "ReplayDrafter",
    "ReplayEnvironment",
    "ReplayRecording",
    "ReplayResult",
    "ReplayTree",
    "ReplayedCycle",
    "record_greedy_trees",
    "record_replay",
]
