"""Drafters: who proposes the draft tree."""

from .base import DraftContext, DraftOutcome, Drafter, SharedCacheVerification
from .causal_lm import CausalLMDrafter, truncated_causal_lm
from .dvi import DVIDrafter, DVIOnlineLearnerConfig
from .eagle3 import Eagle3DrafterConfig, Eagle3DraftModel, Eagle3Drafter

__all__ = [
    "CausalLMDrafter",
    "DVIDrafter",
    "DVIOnlineLearnerConfig",
    "DraftContext",
    "DraftOutcome",
    "Drafter",
    "SharedCacheVerification",
    "Eagle3DrafterConfig",
    "Eagle3DraftModel",
    "Eagle3Drafter",
    "truncated_causal_lm",
]
