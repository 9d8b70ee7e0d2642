"""Saving and loading draft policies: one mixin for every policy, and ``AutoDraftPolicy``.

A policy class opts in with one line; config-only policies (``StaticTreePolicy``) get a
``config.json``, policies that are ``torch.nn.Module`` s also get ``model.safetensors``::

    class StaticTreePolicy(DraftPolicy, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.static"):
        ...

    policy.save_pretrained("my-policy")          # or policy.push_to_hub("org/my-policy")
    policy = AutoDraftPolicy.from_pretrained("org/my-policy")
"""

from __future__ import annotations

from typing import Any, ClassVar

from huggingface_hub import ModelCard

from ..core.cost_curve import CostCurve
from ..core.drafter_identity import DrafterIdentity
from ..core.settings import DEFAULT_MAX_NGRAM_SIZE
from ..hub import AutoArtifact, HubArtifactMixin
from .base import DraftPolicy, TreeConfig, check_training_record


class PolicyHubMixin(HubArtifactMixin, card_kind="policy"):
    """``HubArtifactMixin`` with the policy model card; set ``artifact_type="hf_adaptive_spec.policy.<method>"``."""

    #: whether ``config.json`` leaves out the training record's entries that are unset (a static or heuristic policy,
    #: which is marked only when ranked on a curve: its settings, and the bench's digest of them, stay as they were
    #: before it could be marked; a learned policy writes them, set or not)
    omits_unset_training_record: ClassVar[bool] = False

    def saved_settings(self) -> dict[str, Any]:
        settings = super().saved_settings()
        if not self.omits_unset_training_record:
            return settings
        return {key: value for key, value in settings.items() if key not in TRAINING_RECORD_KEYS or value is not None}

    def generate_model_card(self, **kwargs: Any) -> ModelCard:
        """The policy card, whose usage line passes the prompt-lookup branch the policy was trained with
        (:func:`lookup_generate_kwargs` of ``trained_with_lookup_tokens``), unless ``usage_kwargs`` is given. Unless
        given, its ``drafter`` and ``cost_curve`` are those the policy records (``trained_for_drafter``,
        ``trained_on``: a policy loaded and saved again keeps naming them) and a config-only policy's ``settings``
        are those ``config.json`` holds (a static tree's depth, top_k and total_tokens)."""
        kwargs.setdefault("usage_kwargs", lookup_generate_kwargs(
            self.trained_with_lookup_tokens, self.trained_with_lookup_ngram_size or DEFAULT_MAX_NGRAM_SIZE
        ))
        drafter, curve = self.trained_for_drafter, self.trained_on
        if kwargs.get("drafter") is None and drafter is not None:
            kwargs["drafter"] = (f"`{drafter.name}` (weights digest `{drafter.weights}`, recorded in `config.json` as "
                                 "`trained_for_drafter`)")
        if kwargs.get("cost_curve") is None and curve is not None:
            kwargs["cost_curve"] = f"`{curve}` (recorded in `config.json` as `trained_on`)"
        if kwargs.get("settings") is None and not self._is_trained():
            settings = {key: value for key, value in self.saved_settings().items() if key not in TRAINING_RECORD_KEYS}
            kwargs["settings"] = ", ".join(f"`{key}={value!r}`" for key, value in settings.items()) or None
        return super().generate_model_card(**kwargs)

    def save_pretrained(self, save_directory, **kwargs):
        """``HubArtifactMixin.save_pretrained``, after :meth:`~DraftPolicy.check_settings`: a setting changed since
        construction that the policy cannot run with would be written to a ``config.json`` loading refuses."""
        self.check_settings()
        return super().save_pretrained(save_directory, **kwargs)

    def mark_trained_on(
        self,
        curve: CostCurve,
        drafter: DrafterIdentity | None = None,
        lookup_tokens: int | None = None,
        lookup_ngram_size: int | None = None,
    ) -> None:
        """Record the cost curve this policy is (re)trained on, the drafter whose acceptance it learns from and
        the prompt-lookup branch every replayed tree carried (``lookup_tokens``; 0: none, None: not recorded;
        ``lookup_ngram_size``: the longest n-gram it matched, recorded only with a branch): the engine compares
        them with each call's, and ``save_pretrained`` writes them to ``config.json`` as ``trained_on``,
        ``trained_for_drafter``, ``trained_with_lookup_tokens`` and ``trained_with_lookup_ngram_size``."""
        check_training_record(type(self).__name__, curve, drafter, lookup_tokens, lookup_ngram_size)
        self.trained_on = curve
        self.trained_for_drafter = drafter
        self.trained_with_lookup_tokens = lookup_tokens
        self.trained_with_lookup_ngram_size = lookup_ngram_size if lookup_tokens else None

    def _read_training_record(
        self,
        trained_on: dict | None = None,
        trained_for_drafter: dict | None = None,
        trained_with_lookup_tokens: int | None = None,
        trained_with_lookup_ngram_size: int | None = None,
    ) -> None:
        """Restore what :meth:`mark_trained_on` recorded from a ``config.json``'s entries."""
        self.mark_trained_on(
            CostCurve.from_config(trained_on), DrafterIdentity.from_config(trained_for_drafter),
            trained_with_lookup_tokens, trained_with_lookup_ngram_size,
        )


def lookup_generate_kwargs(lookup_tokens: int | None, ngram_size: int = DEFAULT_MAX_NGRAM_SIZE) -> str:
    """The ``generate`` arguments of the prompt-lookup branch a policy was trained with, as a card's usage line
    appends them (``", prompt_lookup_num_tokens=4"``; "" without the branch or without a record of one)."""
    if not lookup_tokens:
        return ""
    ngrams = "" if ngram_size == DEFAULT_MAX_NGRAM_SIZE else f", max_matching_ngram_size={ngram_size}"
    return f", prompt_lookup_num_tokens={lookup_tokens}{ngrams}"


def tree_settings(tree: TreeConfig) -> dict[str, int]:
    """A policy's ``depth``, ``top_k`` and ``total_tokens`` arguments, read from the tree it holds."""
    return {"depth": tree.depth, "top_k": tree.top_k, "total_tokens": tree.total_tokens}


#: the ``config.json`` entries of what :meth:`PolicyHubMixin.mark_trained_on` records
TRAINING_RECORD_KEYS = ("trained_on", "trained_for_drafter", "trained_with_lookup_tokens",
                        "trained_with_lookup_ngram_size")


def trained_on_setting(policy: DraftPolicy) -> dict[str, dict | int | None]:
    """A learned policy's ``trained_on``, ``trained_for_drafter``, ``trained_with_lookup_tokens`` and
    ``trained_with_lookup_ngram_size`` arguments, read from what it holds now."""
    curve, drafter = policy.trained_on, policy.trained_for_drafter
    return {"trained_on": None if curve is None else curve.to_config(),
            "trained_for_drafter": None if drafter is None else drafter.to_config(),
            "trained_with_lookup_tokens": policy.trained_with_lookup_tokens,
            "trained_with_lookup_ngram_size": policy.trained_with_lookup_ngram_size}


class AutoDraftPolicy(AutoArtifact):
    """Loads any registered draft policy, choosing the class from ``config.json``'s ``artifact_type``."""

    base_class = DraftPolicy
