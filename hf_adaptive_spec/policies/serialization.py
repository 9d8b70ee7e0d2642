"""Saving and loading draft policies: one mixin for every policy, and ``AutoDraftPolicy``.

A policy class opts in with one line; config-only policies (``StaticTreePolicy``) get a
``config.json``, policies that are ``torch.nn.Module`` s also get ``model.safetensors``::

    class StaticTreePolicy(DraftPolicy, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.static"):
        ...

    policy.save_pretrained("my-policy")          # or policy.push_to_hub("org/my-policy")
    policy = AutoDraftPolicy.from_pretrained("org/my-policy")
"""

from __future__ import annotations

from ..core.cost_curve import CostCurve
from ..core.drafter_identity import DrafterIdentity
from ..hub import AutoArtifact, HubArtifactMixin
from .base import DraftPolicy, TreeConfig


class PolicyHubMixin(HubArtifactMixin, card_kind="policy"):
    """``HubArtifactMixin`` with the policy model card; set ``artifact_type="hf_adaptive_spec.policy.<method>"``."""

    def mark_trained_on(self, curve: CostCurve, drafter: DrafterIdentity | None = None) -> None:
        """Record the cost curve this policy is (re)trained on and the drafter whose acceptance it learns from:
        the engine compares both with each call's, and ``save_pretrained`` writes them to ``config.json`` as
        ``trained_on`` and ``trained_for_drafter``."""
        self.trained_on = curve
        self.trained_for_drafter = drafter


def tree_settings(tree: TreeConfig) -> dict[str, int]:
    """A policy's ``depth``, ``top_k`` and ``total_tokens`` arguments, read from the tree it holds."""
    return {"depth": tree.depth, "top_k": tree.top_k, "total_tokens": tree.total_tokens}


def trained_on_setting(policy: DraftPolicy) -> dict[str, dict | None]:
    """A learned policy's ``trained_on`` and ``trained_for_drafter`` arguments, read from what it holds now."""
    curve, drafter = policy.trained_on, policy.trained_for_drafter
    return {"trained_on": None if curve is None else curve.to_config(),
            "trained_for_drafter": None if drafter is None else drafter.to_config()}


class AutoDraftPolicy(AutoArtifact):
    """Loads any registered draft policy, choosing the class from ``config.json``'s ``artifact_type``."""

    base_class = DraftPolicy
