"""Re-SpS training: PPO for the Re-SpS draft policy on exact replays (config, trainer, replay environment)."""

from .config import ReSpSConfig
from .environment import MultiReplayEnvironment
from .rollouts import ReplayRollouts
from .trainer import ReSpSTrainer

__all__ = ["MultiReplayEnvironment", "ReSpSConfig", "ReSpSTrainer", "ReplayRollouts"]
