"""Draft policies: who decides the tree shape each cycle."""

from .base import CycleFeedback, CycleState, DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo
from .static import StaticTreePolicy

__all__ = [
    "CycleFeedback",
    "CycleState",
    "DraftPolicy",
    "DraftStepInfo",
    "StaticTreePolicy",
    "TreeConfig",
    "VerifySizeInfo",
]
