"""Draft policies: who decides the tree shape each cycle."""

from .base import CycleFeedback, CycleState, DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo
from .heuristics import ConfidenceThresholdPolicy, HeuristicLengthPolicy
from .ltd import LTDPolicy
from .radar import RadarPolicy
from .resps import ReSpSPolicy
from .serialization import AutoDraftPolicy, PolicyHubMixin
from .static import LookupFirstPolicy, StaticTreePolicy

__all__ = [
    "AutoDraftPolicy",
    "ConfidenceThresholdPolicy",
    "CycleFeedback",
    "CycleState",
    "DraftPolicy",
    "DraftStepInfo",
    "HeuristicLengthPolicy",
    "LTDPolicy",
    "LookupFirstPolicy",
    "PolicyHubMixin",
    "RadarPolicy",
    "ReSpSPolicy",
    "StaticTreePolicy",
    "TreeConfig",
    "VerifySizeInfo",
]
