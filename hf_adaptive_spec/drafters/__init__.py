"""Drafters: who proposes the draft tree."""

from .base import DraftContext, Drafter, DraftOutcome, SharedCacheVerification
from .causal_lm import CausalLMDrafter, truncated_causal_lm
from .dvi import DVIDrafter, DVIOnlineLearnerConfig
from .eagle3 import Eagle3Drafter, Eagle3DrafterConfig, Eagle3DraftModel

__all__ = [
    "CausalLMDrafter",
    "DVIDrafter",
    "DVIOnlineLearnerConfig",
    "DraftContext",
    "DraftOutcome",
    "Drafter",
    "Eagle3DraftModel",
    "Eagle3Drafter",
    "Eagle3DrafterConfig",
    "SharedCacheVerification",
    "truncated_causal_lm",
]
