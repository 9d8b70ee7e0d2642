"""Draft policies: who decides the tree shape each cycle."""

from .base import CycleFeedback, CycleState, DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo
from .serialization import AutoDraftPolicy, PolicyHubMixin
from .static import StaticTreePolicy

__all__ = [
    "AutoDraftPolicy",
    "PolicyHubMixin",
    "CycleFeedback",
    "CycleState",
    "DraftPolicy",
    "DraftStepInfo",
    "StaticTreePolicy",
    "TreeConfig",
    "VerifySizeInfo",
]
