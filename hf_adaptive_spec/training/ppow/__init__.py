"""PPOW: window-level RL post-training of an EAGLE-3 drafter (config, trainer, rewards, ADAW)."""

from .config import PPOWConfig
from .drafting import DraftedWindows, draft_windows, first_draft_step
from .rewards import proximity_reward, speedup_reward, window_rewards
from .trainer import PPOWTrainer, WindowRollout, has_window, window_starts
from .verification import ConversationPass, WindowVerdicts, WindowVerifier, accepted_prefix_lengths
from .windows import criticality_scores, hard_window_fraction, select_prefixes, window_priorities

__all__ = [
    "ConversationPass",
    "DraftedWindows",
    "PPOWConfig",
    "PPOWTrainer",
    "WindowRollout",
    "WindowVerdicts",
    "WindowVerifier",
    "accepted_prefix_lengths",
    "criticality_scores",
    "draft_windows",
    "first_draft_step",
    "hard_window_fraction",
    "has_window",
    "proximity_reward",
    "select_prefixes",
    "speedup_reward",
    "window_priorities",
    "window_rewards",
    "window_starts",
]
