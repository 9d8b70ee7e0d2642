"""Environments for training draft policies: exact replay of recorded greedy generations, live
generation, and gymnasium wrappers of the replay."""

from .gym import DraftStepEnv, TreeConfigEnv
from .multi import MultiReplayEnvironment
from .online import OnlineEnvironment
from .recording import ReplayRecording, ReplayTree, record_greedy_trees, record_replay
from .replay import ReplayDrafter, ReplayEnvironment
from .replay_checks import ExtrapolatedCostWarning
from .replayed import ReplayedCycle, ReplayResult
from .storage import load_recording, load_training_recording

__all__ = [
    "DraftStepEnv",
    "ExtrapolatedCostWarning",
    "MultiReplayEnvironment",
    "OnlineEnvironment",
    "ReplayDrafter",
    "ReplayEnvironment",
    "ReplayRecording",
    "ReplayResult",
    "ReplayTree",
    "ReplayedCycle",
    "TreeConfigEnv",
    "load_recording",
    "load_training_recording",
    "record_greedy_trees",
    "record_replay",
]
