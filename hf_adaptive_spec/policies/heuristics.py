"""transformers' own assisted-generation heuristics as draft policies: the baselines a learned policy
has to beat. Both draft a chain, as transformers' assistant does.

- :class:`ConfidenceThresholdPolicy`: ``assistant_confidence_threshold``. Drafting stops after a token
  whose draft probability is below the threshold (the token is still verified); the threshold
  then follows the accepted and rejected draft tokens of the call, as transformers adapts it when
  scikit-learn is installed: the point of their ROC curve that minimises ``FPR + 3 * FNR``. The
  samples start afresh with each ``generate`` call and the threshold carries over, as in transformers.
- :class:`HeuristicLengthPolicy`: ``num_assistant_tokens_schedule="heuristic"``. The chain grows by
  2 after a cycle that accepted every drafted token and shrinks by 1 (to at least 1) otherwise.

Both carry what they adapted from one ``generate`` call to the next, and ``save_pretrained`` writes it
(the threshold, the chain length as ``initial_depth``): a reloaded policy goes on where this one is, as
transformers writes both back to its assistant's generation config.

Defaults are transformers' (``GenerationConfig``: 20 assistant tokens, threshold 0.4).
"""

from __future__ import annotations

import itertools
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

#: transformers' weights of missed accepts (false negatives) against wasted drafts (false positives).
FALSE_NEGATIVE_COST = 3.0
#: samples (drafted tokens up to each cycle's first reject) before the threshold adapts, as transformers.
MIN_SAMPLES = 6


def roc_threshold(probs: list[float], accepted: list[bool]) -> float | None:
    """The probability threshold (draft tokens at or above it count as "would be accepted") that
    minimises ``FPR + 3 * FNR`` over the given samples; None without both outcomes.

    Candidates are the sample probabilities themselves, highest first, after "none" (infinity); the
    first of equal costs wins, as ``numpy.argmin`` over scikit-learn's ``roc_curve`` does. One sort
    and one sweep: the samples grow by a few every cycle.
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


class ConfidenceThresholdPolicy(
    DraftPolicy, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.confidence_threshold"
):
    """Drafts a chain of up to ``depth`` tokens, stopping after a token below the confidence threshold.

    Args:
        depth: the longest chain (transformers' ``num_assistant_tokens``).
        threshold: the starting threshold (transformers' ``assistant_confidence_threshold``).
        adaptive: move the threshold to the ROC optimum of the samples seen (transformers does when
            scikit-learn is installed; this policy needs no scikit-learn).
    """

    omits_unset_training_record = True

    def __init__(self, depth: int = 20, threshold: float = 0.4, adaptive: bool = True, *,
                 trained_on: dict | None = None, trained_for_drafter: dict | None = None,
                 trained_with_lookup_tokens: int | None = None, trained_with_lookup_ngram_size: int | None = None):
        self.depth = depth
        self.threshold, self.adaptive = threshold, adaptive
        self._read_training_record(trained_on, trained_for_drafter, trained_with_lookup_tokens,
                                   trained_with_lookup_ngram_size)
        self.check_settings()
        self.begin_generation()
        self._best_score = 0.0

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
        check_number(owner, "threshold", self.threshold, at_least=0.0, at_most=1.0,
                     meaning="a draft probability, transformers' assistant_confidence_threshold")
        check_flag(owner, "adaptive", self.adaptive)
        tree = check_tree(owner, "config", self.config)
        if tree != TreeConfig(depth=tree.depth, top_k=1, total_tokens=tree.depth + 1):
            raise ValueError(
                f"{owner} drafts a chain, as transformers' assistant does: its config must be TreeConfig(depth=d, "
                f"top_k=1, total_tokens=d + 1) (what it saves: depth alone), got {tree}. Set policy.depth = "
                f"{tree.depth} for a chain of {tree.depth} tokens; StaticTreePolicy drafts other trees."
            )

    def begin_generation(self) -> None:
        """A call's samples start empty; the threshold carries over (as transformers' candidate generator
        is made per call and writes the threshold back to the assistant's generation config)."""
        self.probs: list[float] = []
        self.accepted: list[bool] = []
        self._cycle_probs: list[float] = []

    def tree_config(self, state: CycleState) -> TreeConfig:
        self._best_score = 0.0
        return self.config

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        best = float(step.step_scores.max())
        probability, self._best_score = math.exp(best - self._best_score), best
        return probability >= self.threshold and step.depth < step.config.depth

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        self._cycle_probs = chain_probabilities(info) if len(info.scores) else []
        return info.config.total_tokens - 1

    def observe(self, feedback: CycleFeedback) -> None:
        """Samples of this cycle: the accepted draft tokens, then the first rejected one (if any); tokens
        the prompt-lookup branch carried the path through are not the chain's, so they do not count."""
        drafted, accepted = self._cycle_probs, min(feedback.drafter_accepted_length, len(self._cycle_probs))
        self.probs += drafted[: accepted + 1]
        self.accepted += [True] * accepted + [False] * (accepted < len(drafted))
        self._cycle_probs = []
        if self.adaptive and len(self.probs) >= MIN_SAMPLES:
            threshold = roc_threshold(self.probs, self.accepted)
            self.threshold = self.threshold if threshold is None else threshold

    def _current_settings(self) -> dict:
        return {"depth": self.config.depth, "threshold": self.threshold, "adaptive": self.adaptive,
                **trained_on_setting(self)}

    def __repr__(self) -> str:
        return (
            f"ConfidenceThresholdPolicy(depth={self.config.depth}, threshold={self.threshold:.3f}, "
            f"adaptive={self.adaptive})"
        )


class HeuristicLengthPolicy(DraftPolicy, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.heuristic_length"):
    """Drafts a chain whose length follows transformers' +2/-1 schedule.

    As transformers (``num_matches == len(scores[0]) - 1``), a chain counts as accepted whole against the tokens the
    drafter actually proposed: a chain the engine shortened (the largest verification bucket, the end of the output)
    and accepted whole grows the length too.

    Args:
        initial_depth: the first cycle's chain length (transformers' ``num_assistant_tokens``).
        max_depth: the longest chain (transformers has none; a bound keeps a verification forward small).

    ``policy.depth`` is the chain length the next cycle drafts; it carries over from one ``generate`` call to the
    next, as transformers writes ``num_assistant_tokens`` back to its assistant's generation config, so the next call
    starts from it. ``policy.initial_depth`` is that same setting under the constructor's name (as
    ``num_assistant_tokens`` is both transformers' starting length and the length it adapted to): setting either
    makes the next cycle draft that chain, and ``save_pretrained`` writes it as ``initial_depth``, where the reloaded
    policy starts.
    """

    omits_unset_training_record = True

    def __init__(self, initial_depth: int = 20, max_depth: int = 64, *, trained_on: dict | None = None,
                 trained_for_drafter: dict | None = None, trained_with_lookup_tokens: int | None = None,
                 trained_with_lookup_ngram_size: int | None = None):
        self.depth, self.max_depth = initial_depth, max_depth
        self._read_training_record(trained_on, trained_for_drafter, trained_with_lookup_tokens,
                                   trained_with_lookup_ngram_size)
        self.check_settings()

    @property
    def initial_depth(self) -> int:
        """The chain length the next ``generate`` call starts from: ``policy.depth``, where the calls so far left it
        (transformers' ``num_assistant_tokens`` after a call with the ``"heuristic"`` schedule). Setting it sets
        ``depth``: it was a second attribute that nothing read, and saving wrote ``depth`` in its place."""
        return self.depth

    @initial_depth.setter
    def initial_depth(self, depth: int) -> None:
        self.depth = depth

    def check_settings(self) -> None:
        """Ints ``1 <= depth <= max_depth`` (a float would fail only once the chain grows to it)."""
        super().check_settings()
        depths = {"initial_depth": self.depth, "max_depth": self.max_depth}
        integers = all(isinstance(value, int) and not isinstance(value, bool) for value in depths.values())
        if not integers or not 1 <= self.depth <= self.max_depth:
            raise ValueError(
                "HeuristicLengthPolicy needs ints 1 <= initial_depth <= max_depth (initial_depth, or policy.depth: the "
                f"chain the next cycle drafts, so 1 <= depth <= max_depth), got {depths}."
            )

    def tree_config(self, state: CycleState) -> TreeConfig:
        return TreeConfig(depth=self.depth, top_k=1, total_tokens=self.depth + 1)

    def observe(self, feedback: CycleFeedback) -> None:
        if feedback.draft_depth < 1:
            return
        # the drafter's chain, as transformers counts its assistant's matches (not the lookup branch's)
        grown = self.depth + 2 if feedback.drafter_accepted_length >= feedback.draft_depth else self.depth - 1
        self.depth = max(1, min(self.max_depth, grown))

    def _current_settings(self) -> dict:
        return {"initial_depth": self.depth, "max_depth": self.max_depth, **trained_on_setting(self)}

    def __repr__(self) -> str:
        return f"HeuristicLengthPolicy(initial_depth={self.depth}, max_depth={self.max_depth})"
