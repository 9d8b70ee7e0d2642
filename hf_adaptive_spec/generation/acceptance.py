"""Which drafted tokens the target accepts: greedy matching and recursive rejection sampling."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..core.tree import DraftTree


@dataclass
class Acceptance:
    """The verified outcome of one tree.

    Args:
        path: accepted node indices, root first.
        next_token: the token the target emits after the path (the bonus token).
        score_rows: processed target scores each emitted token was chosen from, one
            ``[vocab]`` row per token of ``path[1:] + [next_token]``.
    """

    path: list[int]
    next_token: int
    score_rows: list[torch.Tensor]


ScoresAt = Callable[[int], torch.Tensor]
"""Maps a tree node to the processed target scores ``[vocab]`` for the token after it."""


def accept_greedy(tree: DraftTree, scores_at: ScoresAt) -> Acceptance:
    """Follow the target's argmax through the tree; stop at the first mismatch."""
    node, path, rows = 0, [0], []
    while True:
        scores = scores_at(node)
        rows.append(scores)
        choice = int(scores.argmax())
        child = next((c for c in tree.children(node) if tree.tokens[c] == choice), None)
        if child is None:
            return Acceptance(path, choice, rows)
        path.append(child)
        node = child


def accept_sampling(tree: DraftTree, scores_at: ScoresAt) -> Acceptance:
    """Recursive rejection sampling over siblings (SpecInfer / EAGLE), lossless.

    At each node the target distribution ``p`` is ``softmax(scores)``. Children are tried in
    order; child ``x`` with proposal ``q`` is accepted with probability ``min(1, p(x)/q(x))``,
    and on rejection ``p`` becomes ``normalise(max(p - q, 0))``. Sampled children share their
    parent's draft distribution ``q``; deterministic (top-k) children have ``q = one_hot(x)``,
    which reduces the rule to "accept with ``p(x)``, else zero ``x`` and renormalise". If every
    child is rejected, the next token is drawn from the residual ``p``.
    """
    node, path, rows = 0, [0], []
    while True:
        scores = scores_at(node)
        rows.append(scores)
        p = torch.softmax(scores.float(), dim=-1)
        q = tree.proposal_probs.get(node)
        q = q.to(p.device) if q is not None else None
        accepted = None
        for child in tree.children(node):
            token = tree.tokens[child]
            ratio = p[token] if q is None else p[token] / q[token]
            if torch.rand(()) < ratio:
                accepted = child
                break
            if q is None:
                p[token] = 0.0
            else:
                p = torch.clamp(p - q, min=0.0)
            total = p.sum()
            if total <= 0:  # numerically exhausted: p == q up to rounding
                p = torch.softmax(scores.float(), dim=-1)
                total = p.sum()
            p = p / total
        if accepted is None:
            return Acceptance(path, int(torch.multinomial(p, 1)), rows)
        path.append(accepted)
        node = accepted
