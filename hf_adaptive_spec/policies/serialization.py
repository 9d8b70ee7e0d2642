"""Saving and loading draft policies: one mixin for every policy, and ``AutoDraftPolicy``.

A policy class opts in with one line; config-only policies (``StaticTreePolicy``) get a
``config.json``, policies that are ``torch.nn.Module`` s also get ``model.safetensors``::

    class StaticTreePolicy(DraftPolicy, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.static"):
        ...

    policy.save_pretrained("my-policy")          # or policy.push_to_hub("org/my-policy")
    policy = AutoDraftPolicy.from_pretrained("org/my-policy")
"""

from __future__ import annotations

from dataclasses import asdict

from ..core.cost_curve import CostCurve
from ..hub import AutoArtifact, HubArtifactMixin
from .base import DraftPolicy


class PolicyHubMixin(HubArtifactMixin, card_kind="policy"):
    """``HubArtifactMixin`` with the policy model card; set ``artifact_type="hf_adaptive_spec.policy.<method>"``."""

    def mark_trained_on(self, curve: CostCurve) -> None:
        """Record the cost curve this policy is (re)trained on: the engine compares it with each
        call's, and ``save_pretrained`` writes it to ``config.json`` as ``trained_on``."""
        self.trained_on = curve
        self._hub_mixin_config["trained_on"] = asdict(curve)


class AutoDraftPolicy(AutoArtifact):
    """Loads any registered draft policy, choosing the class from ``config.json``'s ``artifact_type``."""

    base_class = DraftPolicy
