"""transformers' own assisted-generation heuristics as draft policies: the baselines a learned policy
has to beat. Both draft a chain, as transformers' assistant does, and both stop it at transformers' confidence
gate (:class:`ConfidenceGate`), as transformers' assistant does whatever its schedule.

- :class:`ConfidenceThresholdPolicy`: ``assistant_confidence_threshold`` on a chain of a fixed length
  (``num_assistant_tokens_schedule="constant"``).
- :class:`HeuristicLengthPolicy`: ``num_assistant_tokens_schedule="heuristic"`` (``transient=True``:
  ``"heuristic_transient"``). The chain grows by 2 after a cycle that accepted every drafted token and shrinks by 1
  (to at least 1) otherwise.

The gate: drafting stops after a token whose draft probability is below the threshold (the token is still
verified); the threshold then follows the accepted and rejected draft tokens of the call, as transformers adapts it
when scikit-learn is installed: the point of their ROC curve that minimises ``FPR + 3 * FNR``. Each ``generate``
call starts again from the configured ``threshold`` with no samples, as transformers' candidate generator reads
its assistant's generation config afresh every call (the adapted threshold is not written back). A threshold of 0
(or None) turns the gate and its adaptation off, as in transformers.

What carries over from one call to the next is the ``"heuristic"`` chain length alone (``save_pretrained`` writes
it as ``initial_depth``), as transformers writes ``num_assistant_tokens`` back to its assistant's generation config
for that schedule only.

Defaults are transformers' (``GenerationConfig``: 20 assistant tokens, threshold 0.4). Under sampling the policies
differ from transformers: the gate reads the drafter's raw probabilities and the chain is the drafter's top-1 one
(transformers samples its candidates and gates on the processed probabilities).
"""

from __future__ import annotations

import itertools
import logging
import math

import torch

from ..core.values import check_flag, check_number
from .base import (
    CycleFeedback,
    CycleState,
    DraftPolicy,
    DraftStepInfo,
    TreeConfig,
    VerifySizeInfo,
    check_tree,
    policy_tree,
)
from .serialization import PolicyHubMixin, trained_on_setting

logger = logging.getLogger(__name__)

#: transformers' weights of missed accepts (false negatives) against wasted drafts (false positives).
FALSE_NEGATIVE_COST = 3.0
#: samples (drafted tokens up to each cycle's first reject) before the threshold adapts, as transformers.
MIN_SAMPLES = 6


def roc_threshold(probs: list[float], accepted: list[bool]) -> float | None:
    """The probability threshold (draft tokens at or above it count as "would be accepted") that
    minimises ``FPR + 3 * FNR`` over the given samples; None without both outcomes.

    Candidates are the sample probabilities themselves, highest first, after "none" (infinity); the
    first of equal costs wins, as ``numpy.argmin`` over scikit-learn's ``roc_curve`` does. Costs that are equal in
    exact arithmetic may differ in their last bit here and there (the sums are not computed in the same order), so
    on such ties the two may pick different thresholds. One sort and one sweep: the samples grow by a few every
    cycle.
    """
    positives, negatives = sum(accepted), len(accepted) - sum(accepted)
    if not positives or not negatives:
        return None
    best, best_cost = math.inf, FALSE_NEGATIVE_COST  # predict none: FPR 0, FNR 1
    samples = sorted(zip(probs, accepted), key=lambda sample: -sample[0])
    true_positives = false_positives = 0
    for i, (probability, is_accepted) in enumerate(samples):
        true_positives += is_accepted
        false_positives += not is_accepted
        if i + 1 < len(samples) and samples[i + 1][0] == probability:
            continue  # a threshold admits every sample of its probability at once
        cost = false_positives / negatives + FALSE_NEGATIVE_COST * (1 - true_positives / positives)
        if cost < best_cost:
            best, best_cost = probability, cost
    return best


def chain_probabilities(info: VerifySizeInfo) -> list[float]:
    """Draft probability of each token of a drafted chain, root's child first (from the cumulative
    log-probs of the candidates, one per depth)."""
    order = torch.argsort(info.depths)
    cumulative = [0.0] + info.scores[order].tolist()
    return [math.exp(b - a) for a, b in itertools.pairwise(cumulative)]


class ConfidenceGate:
    """transformers' confidence gate (``assistant_confidence_threshold``), shared by both heuristics: drafting stops
    after a token below ``current_threshold``, and with ``adaptive`` that follows the ROC optimum of the call's
    samples. ``threshold`` is the setting (what ``save_pretrained`` writes); every ``generate`` call starts from it.
    A threshold of 0 or None: no gate and no adaptation (transformers' truthiness checks)."""

    def _init_gate(self, threshold: float | None, adaptive: bool) -> None:
        self.threshold, self.adaptive = threshold, adaptive
        self._best_score = 0.0
        self._begin_gate()

    def _check_gate(self) -> None:
        owner = type(self).__name__
        if self.threshold is not None:
            check_number(owner, "threshold", self.threshold, at_least=0.0, at_most=1.0,
                         meaning="a draft probability, transformers' assistant_confidence_threshold (0 or None: off)")
        check_flag(owner, "adaptive", self.adaptive)

    def _begin_gate(self) -> None:
        """A call starts from the configured threshold with no samples (transformers' candidate generator is made
        per call from the assistant's generation config, to which the adapted threshold is not written back)."""
        self.current_threshold = self.threshold
        self.probs: list[float] = []
        self.accepted: list[bool] = []
        self._cycle_probs: list[float] = []

    def begin_generation(self) -> None:
        self._begin_gate()

    def _begin_chain(self) -> None:
        self._best_score = 0.0

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        best = float(step.step_scores.max())
        probability, self._best_score = math.exp(best - self._best_score), best
        gate_passed = not self.current_threshold or probability >= self.current_threshold
        return gate_passed and step.depth < step.config.depth

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        sampling = self.adaptive and self.current_threshold and len(info.scores)
        self._cycle_probs = chain_probabilities(info) if sampling else []
        return info.config.total_tokens - 1

    def _observe_gate(self, feedback: CycleFeedback) -> None:
        """Samples of this cycle: the accepted draft tokens, then the first rejected one (if any); tokens
        the prompt-lookup branch carried the path through are not the chain's, so they do not count."""
        drafted, accepted = self._cycle_probs, min(feedback.drafter_accepted_length, len(self._cycle_probs))
        self.probs += drafted[: accepted + 1]
        self.accepted += [True] * accepted + [False] * (accepted < len(drafted))
        self._cycle_probs = []
        if self.adaptive and self.current_threshold and len(self.probs) >= MIN_SAMPLES:
            threshold = roc_threshold(self.probs, self.accepted)
            self.current_threshold = self.current_threshold if threshold is None else threshold


class ConfidenceThresholdPolicy(
    ConfidenceGate, DraftPolicy, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.confidence_threshold"
):
    """Drafts a chain of up to ``depth`` tokens, stopping after a token below the confidence threshold
    (transformers' ``"constant"`` schedule with its gate).

    Args:
        depth: the longest chain (transformers' ``num_assistant_tokens``).
        threshold: the threshold each call starts from (transformers' ``assistant_confidence_threshold``; 0 or
            None: no gate). ``policy.current_threshold`` is where the call's adaptation has moved it.
        adaptive: move the threshold to the ROC optimum of the call's samples (transformers does when
            scikit-learn is installed; this policy needs no scikit-learn).
    """

    omits_unset_training_record = True

    def __init__(self, depth: int = 20, threshold: float | None = 0.4, adaptive: bool = True, *,
                 trained_on: dict | None = None, trained_for_drafter: dict | None = None,
                 trained_with_lookup_tokens: int | None = None, trained_with_lookup_ngram_size: int | None = None):
        self.depth = depth
        self._init_gate(threshold, adaptive)
        self._read_training_record(trained_on, trained_for_drafter, trained_with_lookup_tokens,
                                   trained_with_lookup_ngram_size)
        self.check_settings()

    @property
    def depth(self) -> int:
        """The longest chain (the tree is ``policy.config``: a chain of this many tokens)."""
        return self.config.depth

    @depth.setter
    def depth(self, depth: int) -> None:
        self.config = policy_tree(type(self).__name__, depth=depth, top_k=1,
                                  total_tokens=depth + 1 if isinstance(depth, int) else depth)

    def check_settings(self) -> None:
        """The threshold and ``adaptive`` as set now, and a tree that is the chain of ``depth`` tokens the policy
        drafts and saves (``config.json`` holds ``depth`` alone): ``policy.config`` replaced by another tree ran it,
        and its saved copy drafted the chain."""
        super().check_settings()
        owner = type(self).__name__
        self._check_gate()
        tree = check_tree(owner, "config", self.config)
        if tree != TreeConfig(depth=tree.depth, top_k=1, total_tokens=tree.depth + 1):
            raise ValueError(
                f"{owner} drafts a chain, as transformers' assistant does: its config must be TreeConfig(depth=d, "
                f"top_k=1, total_tokens=d + 1) (what it saves: depth alone), got {tree}. Set policy.depth = "
                f"{tree.depth} for a chain of {tree.depth} tokens; StaticTreePolicy drafts other trees."
            )

    def tree_config(self, state: CycleState) -> TreeConfig:
        self._begin_chain()
        return self.config

    def observe(self, feedback: CycleFeedback) -> None:
        self._observe_gate(feedback)

    def _current_settings(self) -> dict:
        return {"depth": self.config.depth, "threshold": self.threshold, "adaptive": self.adaptive,
                **trained_on_setting(self)}

    def __repr__(self) -> str:
        return (f"ConfidenceThresholdPolicy(depth={self.config.depth}, threshold={self.threshold}, "
                f"adaptive={self.adaptive})")


class HeuristicLengthPolicy(
    ConfidenceGate, DraftPolicy, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.heuristic_length"
):
    """Drafts a chain whose length follows transformers' +2/-1 schedule, behind transformers' confidence gate.

    As transformers (``num_matches == len(scores[0]) - 1``), a chain counts as accepted whole against the tokens the
    drafter actually proposed (the gate and the end of the output shorten it; a cycle with no room to draft at the
    end of the output counts as accepted whole), and not when the output ended inside it (an end-of-sequence token
    or a stop among the accepted drafts: transformers' ``n_matches`` counts only the tokens it keeps). A chain the
    engine shortened to fit its largest verification bucket grows to at most what that bucket holds.

    Args:
        initial_depth: the first cycle's chain length (transformers' ``num_assistant_tokens``).
        max_depth: the longest chain (transformers has none; a bound keeps a verification forward small).
        threshold: transformers' ``assistant_confidence_threshold`` (0.4, its default: ``"heuristic"`` runs with the
            gate; 0 or None: the +2/-1 schedule alone), as :class:`ConfidenceThresholdPolicy`'s.
        adaptive: the gate's ROC adaptation, as :class:`ConfidenceThresholdPolicy`'s.
        transient: start every ``generate`` call from ``initial_depth`` (``"heuristic_transient"``); by default the
            length carries over (``"heuristic"``).

    ``policy.depth`` is the chain length the next cycle drafts. Without ``transient`` it carries over from one
    ``generate`` call to the next, as transformers writes ``num_assistant_tokens`` back to its assistant's generation
    config, and ``policy.initial_depth`` is that same setting (as ``num_assistant_tokens`` is both transformers'
    starting length and the length it adapted to): setting either makes the next cycle draft that chain, and
    ``save_pretrained`` writes it as ``initial_depth``. With ``transient``, ``initial_depth`` is where every call
    starts, whatever the last call left in ``depth``.
    """

    omits_unset_training_record = True

    def __init__(self, initial_depth: int = 20, max_depth: int = 64, threshold: float | None = 0.4,
                 adaptive: bool = True, transient: bool = False, *, trained_on: dict | None = None,
                 trained_for_drafter: dict | None = None, trained_with_lookup_tokens: int | None = None,
                 trained_with_lookup_ngram_size: int | None = None):
        self.max_depth, self.transient = max_depth, transient
        self.initial_depth = initial_depth
        self._init_gate(threshold, adaptive)
        self._bucket_room: int | None = None
        self._read_training_record(trained_on, trained_for_drafter, trained_with_lookup_tokens,
                                   trained_with_lookup_ngram_size)
        self.check_settings()

    @classmethod
    def _load(cls, location, **init_kwargs) -> HeuristicLengthPolicy:
        """A policy saved before it had the confidence gate (its ``config.json`` without ``threshold``) ran the +2/-1
        schedule alone: it loads as it ran (``threshold=None``), with a warning, not with the gate's default."""
        if "threshold" not in init_kwargs:
            logger.warning(
                "%s was saved before HeuristicLengthPolicy had transformers' confidence gate (no 'threshold' in its "
                "config.json): it loads as it ran, without the gate (threshold=None). Pass threshold=0.4 to "
                "from_pretrained for transformers' \"heuristic\" at its defaults.", location,
            )
            init_kwargs["threshold"] = None
        return super()._load(location, **init_kwargs)

    @property
    def initial_depth(self) -> int:
        """The chain length the next ``generate`` call starts from: without ``transient``, ``policy.depth``, where the
        calls so far left it (transformers' ``num_assistant_tokens`` after a call with the ``"heuristic"`` schedule);
        with it, the length set here. Setting it sets ``depth`` too."""
        return self._start_depth if self.transient else self.depth

    @initial_depth.setter
    def initial_depth(self, depth: int) -> None:
        self.depth = self._start_depth = depth

    def check_settings(self) -> None:
        """Ints ``1 <= depth <= max_depth`` (a float would fail only once the chain grows to it), the gate's
        settings and ``transient``."""
        super().check_settings()
        depths = {"initial_depth": self.initial_depth, "depth": self.depth, "max_depth": self.max_depth}
        integers = all(isinstance(value, int) and not isinstance(value, bool) for value in depths.values())
        if not integers or not (1 <= self.depth <= self.max_depth and 1 <= self.initial_depth <= self.max_depth):
            raise ValueError(
                "HeuristicLengthPolicy needs ints 1 <= initial_depth <= max_depth (initial_depth, or policy.depth: the "
                f"chain the next cycle drafts, so 1 <= depth <= max_depth), got {depths}."
            )
        self._check_gate()
        check_flag(type(self).__name__, "transient", self.transient)

    def begin_generation(self) -> None:
        super().begin_generation()
        if self.transient:
            self.depth = self._start_depth

    def tree_config(self, state: CycleState) -> TreeConfig:
        self._begin_chain()
        self._bucket_room = None
        return TreeConfig(depth=self.depth, top_k=1, total_tokens=self.depth + 1)

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        """Also notes the chain the engine's largest verification bucket let it draft, when that cut it."""
        room = info.config.total_tokens - 1
        self._bucket_room = room if room < self.depth else None
        return super().num_tokens_to_verify(info)

    def observe(self, feedback: CycleFeedback) -> None:
        self._observe_gate(feedback)
        # the drafter's chain, as transformers counts its assistant's matches (not the lookup branch's), and only the
        # tokens the output kept: a chain the output ended inside was not accepted whole
        accepted_whole = (feedback.drafter_accepted_length >= feedback.draft_depth
                          and feedback.tokens_added >= feedback.accepted_length + 1)
        grown = self.depth + 2 if accepted_whole else self.depth - 1
        if self._bucket_room is not None:
            grown = min(grown, self._bucket_room)
        self.depth = max(1, min(self.max_depth, grown))

    def _current_settings(self) -> dict:
        return {"initial_depth": self.initial_depth, "max_depth": self.max_depth, "threshold": self.threshold,
                "adaptive": self.adaptive, "transient": self.transient, **trained_on_setting(self)}

    def __repr__(self) -> str:
        return (f"HeuristicLengthPolicy(initial_depth={self.initial_depth}, max_depth={self.max_depth}, "
                f"threshold={self.threshold}, adaptive={self.adaptive}, transient={self.transient})")
