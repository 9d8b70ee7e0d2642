"""Drafters: who proposes the draft tree."""

from .base import DraftContext, Drafter
from .causal_lm import CausalLMDrafter, truncated_causal_lm

__all__ = ["CausalLMDrafter", "DraftContext", "Drafter", "truncated_causal_lm"]
