"""``eagle3-default-tree``, transformers' heuristics (``eagle3-confidence``, ``eagle3-heuristic``),
the learned policies (``eagle3-ltd``, ``eagle3-resps``, ``eagle3-radar``) and a candidate policy
(``eagle3-candidate-policy``).

Each runs the ``eagle3`` drafter with another policy, so one interleaved run compares the
static tree set by ``--tree-*`` (the best one found on this machine), EAGLE-3's default tree,
the adaptive baselines from transformers and every learned policy.
"""

from __future__ import annotations

from typing import Any, ClassVar

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ...checkpoints import shipped_checkpoint
from ...core.cost_curve import CostCurve
from ...policies import AutoDraftPolicy, ConfidenceThresholdPolicy, DraftPolicy, HeuristicLengthPolicy, StaticTreePolicy
from ...profiling.identity import shipped_policies_misfit
from ..arguments import MethodOptions
from ..errors import MethodUnavailableError
from .eagle3 import Eagle3


class Eagle3DefaultTree(Eagle3):
    """``eagle3`` with EAGLE-3's default tree (depth 7, top_k 10, total_tokens 60), whatever ``--tree-*`` says."""

    name = "eagle3-default-tree"
    static_tree = False

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        return {**super().method_kwargs(model, tokenizer, options), "assistant_policy": StaticTreePolicy()}


class Eagle3Heuristic(Eagle3):
    """``eagle3`` with one of transformers' assisted-generation heuristics, at transformers' defaults
    (a fresh policy per method: what transformers carries across calls, the ``"heuristic"`` chain length, carries
    across the run's turns). Greedy only in transformers' sense: under sampling the policies gate on the drafter's
    raw probabilities and draft its top-1 chain, where transformers samples its candidates."""

    policy_class: ClassVar[type[DraftPolicy]]
    static_tree = False
    carries_state = True

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        if not hasattr(self, "_policy"):
            self._policy = self.policy_class()
        return {**super().method_kwargs(model, tokenizer, options), "assistant_policy": self._policy}


class Eagle3Confidence(Eagle3Heuristic):
    """``assistant_confidence_threshold`` (0.4, adapted on the ROC curve) on chains of up to 20 tokens."""

    name, policy_class = "eagle3-confidence", ConfidenceThresholdPolicy
    carries_state = False  # its threshold starts from 0.4 every call, as transformers' does


class Eagle3HeuristicLength(Eagle3Heuristic):
    """``num_assistant_tokens_schedule="heuristic"``: chains from 20 tokens, +2 / -1 per cycle, behind the confidence
    gate (0.4, adapted), as transformers runs it by default."""

    name, policy_class = "eagle3-heuristic", HeuristicLengthPolicy


class Eagle3LearnedPolicy(Eagle3):
    """``eagle3`` with a learned policy: ``--<policy>-policy`` (folder or Hub id) or the shipped one (the variant
    trained on the run's cost curve when one is shipped), which only the target and drafter it was trained for
    (the default model and the shipped EAGLE-3 drafter) may use."""

    policy: ClassVar[str]
    static_tree = False

    def own_options_read(self, options: MethodOptions) -> set[str]:
        return {*super().own_options_read(options), f"{self.policy}_policy"}

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        kwargs = super().method_kwargs(model, tokenizer, options)
        source = getattr(options, f"{self.policy}_policy") or self.shipped_policy(model, options)
        return {**kwargs, "assistant_policy": AutoDraftPolicy.from_pretrained(str(source))}

    def shipped_policy(self, model: PreTrainedModel, options: MethodOptions) -> str:
        """The shipped policy's folder for this run's cost curve; refused for another target or drafter."""
        misfit = shipped_policies_misfit(model, self.checkpoint(options))
        if misfit:
            raise MethodUnavailableError(
                f"{self.name}: {misfit}. Pass --{self.policy}-policy PATH, a {self.policy} policy trained for this "
                f"target and drafter (`hf-adaptive-spec train {self.policy}`)."
            )
        try:
            curve = CostCurve.of(model.device, model.dtype, "compiled" if options.compile else "eager")
            return str(shipped_checkpoint(self.policy, curve))
        except (FileNotFoundError, ValueError) as error:
            raise MethodUnavailableError(f"{self.name}: {error} Pass --{self.policy}-policy PATH.") from error


class Eagle3LTD(Eagle3LearnedPolicy):
    name, policy = "eagle3-ltd", "ltd"


class Eagle3ReSpS(Eagle3LearnedPolicy):
    name, policy = "eagle3-resps", "resps"


class Eagle3Radar(Eagle3LearnedPolicy):
    name, policy = "eagle3-radar", "radar"


class Eagle3CandidatePolicy(Eagle3LearnedPolicy):
    """``eagle3`` with a second saved policy (``--candidate-policy``: any policy folder or Hub id), so one interleaved
    run compares, e.g., a retrained policy with the shipped one of ``eagle3-ltd``, as ``eagle3-candidate`` compares
    drafters."""

    name, policy = "eagle3-candidate-policy", "candidate"

    def shipped_policy(self, model: PreTrainedModel, options: MethodOptions) -> str:
        raise MethodUnavailableError(
            f"{self.name} needs --candidate-policy PATH (a saved policy's folder or Hub id) "
            "to compare with the shipped ones."
        )
