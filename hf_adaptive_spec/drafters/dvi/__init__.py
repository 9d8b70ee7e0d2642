"""DVI (Draft, Verify, & Improve): self-speculation with the target's first layers and a LoRA draft
head that learns online from the verifier's accept/reject decisions."""

from .buffer import DVIRecord, RolloutBuffer, outcome_records
from .config import DVIOnlineLearnerConfig
from .drafter import DVIDrafter
from .head import DVIDraftHead, default_lora_config
from .online import DVIUpdater, UpdateMetrics, entropy, kl_to_target, policy_gradient, reward_masked_ce
from .schedule import KLToRLSchedule, LossWeights

__all__ = [
    "DVIDraftHead",
    "DVIDrafter",
    "DVIOnlineLearnerConfig",
    "DVIRecord",
    "DVIUpdater",
    "KLToRLSchedule",
    "LossWeights",
    "RolloutBuffer",
    "UpdateMetrics",
    "default_lora_config",
    "entropy",
    "kl_to_target",
    "outcome_records",
    "policy_gradient",
    "reward_masked_ce",
]
