"""LTD's observations, built inside the policy's hooks from what the engine passes them.

Replay (``hf_adaptive_spec.environments``) drives the same hooks with the same
:class:`DraftStepInfo` / :class:`VerifySizeInfo`, so training and ``generate`` compute the same
numbers. Candidate scores are cumulative draft log-probs; the observation holds their path
probabilities ``exp(score)`` in ``[0, 1]`` (the paper's ``P``), so zero padding means "no candidate".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..base import DraftStepInfo, TreeConfig, VerifySizeInfo


def path_probabilities(scores: torch.Tensor, size: int) -> torch.Tensor:
    """``exp(scores)`` sorted in descending order, truncated or zero-padded to ``[size]`` (float32)."""
    probabilities = scores.double().exp().float().sort(descending=True).values[:size]
    return F.pad(probabilities, (0, size - probabilities.numel()))


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
    return torch.cat([torch.tensor(scalars), path_probabilities(step.step_scores, tree.top_k**2)])


def size_observation(
    info: VerifySizeInfo, tree: TreeConfig, context_scale: float, lookup_feature: bool = False
) -> torch.Tensor:
    """The size policy's input after drafting, ``[2 + top_k + (depth - 1) · top_k²]`` (+1 with ``lookup_feature``).

    ``[drafted depth / tree.depth, context_length / context_scale]`` (then ``lookup_length /
    tree.depth`` with ``lookup_feature``), then, level by level, the path probabilities of that
    level's candidates (sorted, zero-padded to the level's size).
    """
    drafted = int(info.depths.max()) if info.depths.numel() else 0
    scalars = [drafted / tree.depth, info.context_length / context_scale]
    scalars += [info.lookup_length / tree.depth] if lookup_feature else []
    levels = [
        path_probabilities(info.scores[info.depths == level], size) for level, size in enumerate(level_sizes(tree), 1)
    ]
    return torch.cat([torch.tensor(scalars), *levels])


def size_action_mask(info: VerifySizeInfo, tree: TreeConfig, choices: torch.Tensor) -> torch.Tensor:
    """``[len(choices)]`` bool: one allowed choice per distinct verification size.

    The engine verifies ``min(choice, candidates, total_tokens - 1)``; choices that clamp to
    the same size as a smaller one are masked, so no two actions mean the same thing.
    """
    effective = choices.clamp(max=min(info.scores.numel(), tree.total_tokens - 1))
    return torch.cat([torch.ones(1, dtype=torch.bool), effective[1:] != effective[:-1]])
