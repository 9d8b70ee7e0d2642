"""LTD training: config, collaborative schedule, replay rollouts and the PPO trainer."""

from .config import LTDConfig
from .phases import Phase, PhasePolicy, build_schedule, phase_at
from .rollout import PPOUpdates, ReplayRollouts, Rollout
from .trainer import LTDTrainer

__all__ = [
    "LTDConfig",
    "LTDTrainer",
    "PPOUpdates",
    "Phase",
    "PhasePolicy",
    "ReplayRollouts",
    "Rollout",
    "build_schedule",
    "phase_at",
]
