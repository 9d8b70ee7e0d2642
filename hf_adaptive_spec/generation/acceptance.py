"""Which drafted tokens the target accepts: greedy matching and recursive rejection sampling."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..core.tree import DraftTree

ScoresAt = Callable[[int], torch.Tensor]
"""Maps a tree node to the processed target scores ``[vocab]`` for the token after it."""

StopsAfter = Callable[[int, int], bool]
"""Told each token the walk chooses, in order (the node whose row it was chosen from, the token), before the walk
reads the next row: True ends the walk there, the token emitted last (a stopping criterion stopped at it)."""


@dataclass
class Acceptance:
    """The verified outcome of one tree.

    Args:
        path: accepted node indices, root first.
        next_token: the token the target emits after the path (the bonus token).
        scores_at: the scores the walk chose from: each emitted token's row is that of the path node before it.
        stopped_at: the drafted node whose token ``next_token`` is, where the walk ended at a stop (``stops_after``)
            on a token verification accepted; None otherwise.
    """

    path: list[int]
    next_token: int
    scores_at: ScoresAt
    stopped_at: int | None = None

    @property
    def verified_path(self) -> list[int]:
        """The nodes verification is known to have accepted, root first: ``path``, and the node a stop ended the walk
        on (past a stop no row is processed, so whether later drafts were right is not known)."""
        return self.path if self.stopped_at is None else [*self.path, self.stopped_at]

    def score_row(self, index: int) -> torch.Tensor:
        """The processed target scores ``[vocab]`` the ``index``-th emitted token (of ``path[1:] + [next_token]``)
        was chosen from; computed when asked (``output_scores``), not by a greedy walk that read its choices."""
        return self.scores_at(self.path[index])


def accept_greedy(
    tree: DraftTree, scores_at: ScoresAt, argmaxes: Sequence[int | None] | None = None,
    stops_after: StopsAfter | None = None,
) -> Acceptance:
    """Follow the target's argmax through the tree; stop at the first mismatch (or where ``stops_after`` says).

    ``argmaxes``: every node's argmax, read at once (``TreeLogits.argmaxes``), where the scores are the rows
    themselves; a node without one (None, or no list) reads its own row's argmax."""
    node, path = 0, [0]
    while True:
        choice = argmaxes[node] if argmaxes is not None else None
        if choice is None:
            choice = int(scores_at(node).argmax())
        child = next((c for c in tree.children(node) if tree.tokens[c] == choice), None)
        stopped = stops_after is not None and stops_after(node, choice)
        if child is None or stopped:
            return Acceptance(path, choice, scores_at, stopped_at=child if stopped else None)
        path.append(child)
        node = child


def accept_sampling(tree: DraftTree, scores_at: ScoresAt, stops_after: StopsAfter | None = None) -> Acceptance:
    """Recursive rejection sampling over siblings (SpecInfer / EAGLE), lossless; the walk also ends where
    ``stops_after`` says.

    At each node the target distribution ``p`` is ``softmax(scores)``. Children are tried in
    order; child ``x`` with proposal ``q`` is accepted with probability ``min(1, p(x)/q(x))``,
    and on rejection ``p`` becomes ``normalise(max(p - q, 0))``. Sampled children share their
    parent's draft distribution ``q``; deterministic (top-k) children have ``q = one_hot(x)``,
    which reduces the rule to "accept with ``p(x)``, else zero ``x`` and renormalise". If every
    child is rejected, the next token is drawn from the residual ``p``.

    Each node reads the device once (one synchronisation on a GPU, as greedy's argmax), whatever
    its number of children: see :func:`_draw_deterministic` and :func:`_draw_sampled`.
    """
    node, path = 0, [0]
    while True:
        scores = scores_at(node)  # only along the accepted path, in order: stateful processors see stock's calls
        p = torch.softmax(scores.float(), dim=-1)
        children = tree.children(node)
        q = tree.proposal_probs.get(node)
        if q is None or not children:
            accepted, token = _draw_deterministic(tree, children, p)
        else:
            accepted, token = _draw_sampled(tree, children, p, q.to(p.device))
        chosen = token if accepted is None else tree.tokens[accepted]
        stopped = stops_after is not None and stops_after(node, chosen)
        if accepted is None or stopped:
            return Acceptance(path, chosen, scores_at, stopped_at=accepted if stopped else None)
        path.append(accepted)
        node = accepted


def _draw_deterministic(tree: DraftTree, children: list[int], p: torch.Tensor) -> tuple[int | None, int]:
    """(accepted child or None, token drawn) for children that are deterministic drafts (top-k, prompt lookup).

    Accepting each in turn with its renormalised residual probability, then drawing from what is left, gives
    every child's token ``x`` probability ``p(x)`` and every other token its own: the same as one draw from
    ``p``, accepting the child that spells it. So one draw, one read.
    """
    token = int(torch.multinomial(p, 1))
    return next((c for c in children if tree.tokens[c] == token), None), token


def _draw_sampled(tree: DraftTree, children: list[int], p: torch.Tensor, q: torch.Tensor) -> tuple[int | None, int]:
    """(accepted child or None, token drawn from the final residual) for children drawn i.i.d. from ``q``.

    ``q`` is normalised here: the tree builder draws from the drafter's rows with ``torch.multinomial``, which
    normalises them, so rows that are not exact log-probs (half precision, a temperature applied to log-probs)
    still state the distribution the drafts came from. Every ratio, residual and acceptance is computed on the
    device and read back at once, with a draw from the last residual (unused when a child is accepted).
    """
    q = q.float()  # normalised in float32: in a half-precision row q / q.sum() rounds every ratio off p / q
    q = q / q.sum()
    ratios = []
    for child in children:
        token = tree.tokens[child]
        ratios.append(p[token] / q[token])
        residual = torch.clamp(p - q, min=0.0)
        total = residual.sum()
        # numerically exhausted (p == q up to rounding): keep p
        p = torch.where(total > 0, residual / total.clamp_min(torch.finfo(p.dtype).tiny), p)
    hits = torch.rand(len(children), device=p.device) < torch.stack(ratios)
    *hit_values, token = torch.cat([hits.long(), torch.multinomial(p, 1)]).tolist()
    return next((c for c, hit in zip(children, hit_values) if hit), None), token
