"""LTD's observations, built inside the policy's hooks from what the engine passes them.

Replay (``hf_adaptive_spec.environments``) drives the same hooks with the same
:class:`DraftStepInfo` / :class:`VerifySizeInfo`, so training and ``generate`` compute the same
numbers. Candidate scores are cumulative draft log-probs; the observation holds their path
probabilities ``exp(score)`` in ``[0, 1]`` (the paper's ``P``), so zero padding means "no candidate".
"""

from __future__ import annotations

import math

import torch

from ..base import DraftStepInfo, TreeConfig, VerifySizeInfo


def _sorted_probabilities(scores: list[float], size: int) -> list[float]:
    """``exp(scores)`` sorted in descending order, truncated or zero-padded to ``size``."""
    # on the host: a policy hook sees a few dozen scores, and each torch op would cost more than its arithmetic
    probabilities = sorted((math.exp(score) for score in scores), reverse=True)[:size]
    return probabilities + [0.0] * (size - len(probabilities))


def level_sizes(tree: TreeConfig) -> list[int]:
    """Candidates per draft level of an EAGLE-2 tree: ``top_k`` at depth 1, ``top_k²`` below."""
    return [tree.top_k] + [tree.top_k**2] * (tree.depth - 1)


def depth_observation_size(tree: TreeConfig, lookup_feature: bool = False) -> int:
    return 2 + lookup_feature + tree.top_k**2


def size_observation_size(tree: TreeConfig, lookup_feature: bool = False) -> int:
    return 2 + lookup_feature + sum(level_sizes(tree))


def depth_observation(
    step: DraftStepInfo, tree: TreeConfig, context_scale: float, lookup_feature: bool = False
) -> torch.Tensor:
    """The depth policy's input after a draft step, ``[2 + top_k²]`` (+1 with ``lookup_feature``).

    ``[depth / tree.depth, context_length / context_scale, P_1 ≥ … ≥ P_{top_k²}]`` where ``P``
    are the path probabilities of the candidates this step added (the latest level only). With
    ``lookup_feature``, ``lookup_length / tree.depth`` follows the two scalars.
    """
    scalars = [step.depth / tree.depth, step.context_length / context_scale]
    scalars += [step.lookup_length / tree.depth] if lookup_feature else []
    return torch.tensor(scalars + _sorted_probabilities(step.step_scores.tolist(), tree.top_k**2), device="cpu")


def size_observation(
    info: VerifySizeInfo, tree: TreeConfig, context_scale: float, lookup_feature: bool = False
) -> torch.Tensor:
    """The size policy's input after drafting, ``[2 + top_k + (depth - 1) · top_k²]`` (+1 with ``lookup_feature``).

    ``[drafted depth / tree.depth, context_length / context_scale]`` (then ``lookup_length /
    tree.depth`` with ``lookup_feature``), then, level by level, the path probabilities of that
    level's candidates (sorted, zero-padded to the level's size).
    """
    depths, sizes = info.depths.tolist(), level_sizes(tree)
    drafted = max(depths, default=0)
    scalars = [drafted / tree.depth, info.context_length / context_scale]
    scalars += [info.lookup_length / tree.depth] if lookup_feature else []
    by_level: list[list[float]] = [[] for _ in sizes]
    for score, level in zip(info.scores.tolist(), depths):
        if 1 <= level <= len(sizes):
            by_level[level - 1].append(score)
    levels = [p for scores, size in zip(by_level, sizes) for p in _sorted_probabilities(scores, size)]
    return torch.tensor(scalars + levels, device="cpu")


def size_action_mask(info: VerifySizeInfo, tree: TreeConfig, choices: torch.Tensor) -> torch.Tensor:
    """``[len(choices)]`` bool: one allowed choice per distinct verification size.

    The engine verifies ``min(choice, candidates, total_tokens - 1)``; choices that clamp to
    the same size as a smaller one are masked, so no two actions mean the same thing. On ``choices``' device.
    """
    effective = choices.clamp(max=min(info.scores.numel(), tree.total_tokens - 1))
    return torch.cat([torch.ones(1, dtype=torch.bool, device=choices.device), effective[1:] != effective[:-1]])
