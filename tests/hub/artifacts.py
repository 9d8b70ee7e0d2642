"""Tiny artifacts declared with the Hub mixins, the way learned policies and drafters will be.

Imported by the tests and by ``hub_client.py`` in its subprocesses. Artifact types use the
``hf_adaptive_spec_tests.`` prefix so they never collide with the library's own.
"""

from __future__ import annotations

import torch
from torch import nn

from hf_adaptive_spec.hub import HubArtifactMixin
from hf_adaptive_spec.policies import CycleState, DraftPolicy, TreeConfig
from hf_adaptive_spec.policies.serialization import PolicyHubMixin

MLP_TYPE = "hf_adaptive_spec_tests.policy.mlp"
GRU_TYPE = "hf_adaptive_spec_tests.policy.gru"


class TinyMLPPolicy(DraftPolicy, nn.Module, PolicyHubMixin, artifact_type=MLP_TYPE):
    """A learned-policy stand-in: an MLP scoring draft depths from one hidden state."""

    feature_layers = (-1,)

    def __init__(self, hidden_size: int = 6, width: int = 8, max_depth: int = 4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(hidden_size, width), nn.ReLU())
        self.head = nn.Linear(width, max_depth)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Depth logits ``[..., max_depth]`` from features ``[..., hidden_size]``."""
        return self.head(self.body(features))

    def tree_config(self, state: CycleState) -> TreeConfig:
        depth = int(self(state.features[-1]).argmax()) + 1
        return TreeConfig(depth=depth, top_k=1, total_tokens=depth + 1)


class TinyGRUPolicy(DraftPolicy, nn.Module, PolicyHubMixin, artifact_type=GRU_TYPE):
    """A second learned-policy stand-in, for wrong-artifact-type errors."""

    def __init__(self, hidden_size: int = 6):
        super().__init__()
        self.cell = nn.GRUCell(hidden_size, hidden_size)


class TinyThresholdPolicy(DraftPolicy, PolicyHubMixin, artifact_type="hf_adaptive_spec_tests.policy.threshold"):
    """A config-only policy: its constructor arguments are all there is to save."""

    def __init__(self, threshold: float = -2.0, depth: int = 6):
        self.threshold = threshold
        self.depth = depth


class TinyDraftHead(nn.Module, HubArtifactMixin, artifact_type="hf_adaptive_spec_tests.drafter.head",
                    card_kind="eagle3_drafter"):
    """A non-policy module artifact, which ``AutoDraftPolicy`` must refuse."""

    def __init__(self, hidden_size: int = 6):
        super().__init__()
        self.proj = nn.Linear(hidden_size, hidden_size)
