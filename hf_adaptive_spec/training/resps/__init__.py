"""Re-SpS training: PPO for the Re-SpS draft policy on exact replays (config, trainer, rollouts)."""

from .config import ReSpSConfig
from .rollouts import ReplayRollouts
from .trainer import ReSpSTrainer

__all__ = ["ReSpSConfig", "ReSpSTrainer", "ReplayRollouts"]
