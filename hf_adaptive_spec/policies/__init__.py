"""Draft policies: who decides the tree shape each cycle."""

from .base import CycleFeedback, CycleState, DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo
from .serialization import AutoDraftPolicy, PolicyHubMixin
from .heuristics import ConfidenceThresholdPolicy, HeuristicLengthPolicy
from .ltd import LTDPolicy
from .radar import RadarPolicy
from .resps import ReSpSPolicy
from .static import LookupFirstPolicy, StaticTreePolicy

__all__ = [
    "AutoDraftPolicy",
    "PolicyHubMixin",
    "ConfidenceThresholdPolicy",
    "CycleFeedback",
    "CycleState",
    "DraftPolicy",
    "DraftStepInfo",
    "HeuristicLengthPolicy",
    "LTDPolicy",
    "LookupFirstPolicy",
    "RadarPolicy",
    "ReSpSPolicy",
    "StaticTreePolicy",
    "TreeConfig",
    "VerifySizeInfo",
]
