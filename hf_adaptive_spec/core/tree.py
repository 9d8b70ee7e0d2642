"""The draft tree: tokens, parent links, depths and cumulative draft log-probs."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class DraftTree:
    """A token tree rooted at the last committed token (node 0), built depth by depth.

    Nodes are stored in creation order, which is breadth-first: every node's parent has a
    smaller index. ``scores`` are cumulative draft log-probs (the root has 0).
    ``proposal_probs[i]`` is set when node ``i``'s children were *sampled* from a draft
    distribution (shape ``[vocab]``, target vocabulary); deterministic top-k children have none.
    """

    tokens: list[int]
    parents: list[int]
    depths: list[int]
    scores: list[float]
    proposal_probs: dict[int, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def with_root(cls, root_token: int) -> DraftTree:
        return cls(tokens=[root_token], parents=[-1], depths=[0], scores=[0.0])

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def max_depth(self) -> int:
        return max(self.depths)

    def add_children(self, parent: int, tokens: list[int], log_probs: list[float]) -> list[int]:
        """Append children of ``parent``; returns their node indices."""
        start = len(self.tokens)
        base = self.scores[parent]
        depth = self.depths[parent] + 1
        for token, log_prob in zip(tokens, log_probs):
            self.tokens.append(int(token))
            self.parents.append(parent)
            self.depths.append(depth)
            self.scores.append(base + float(log_prob))
        return list(range(start, len(self.tokens)))

    def children(self, node: int) -> list[int]:
        """Children of ``node`` in creation order."""
        return [i for i in range(node + 1, len(self.parents)) if self.parents[i] == node]

    def path_to(self, node: int) -> list[int]:
        """Node indices from the root to ``node`` (inclusive)."""
        path = []
        while node != -1:
            path.append(node)
            node = self.parents[node]
        return path[::-1]

    def nodes_at_depth(self, depth: int) -> list[int]:
        return [i for i, d in enumerate(self.depths) if d == depth]

    def ancestor_mask(self) -> torch.Tensor:
        """``[n, n]`` bool: ``mask[i, j]`` is True when node j is node i or one of its ancestors."""
        n = len(self)
        mask = torch.eye(n, dtype=torch.bool, device="cpu")
        for i in range(1, n):
            mask[i] |= mask[self.parents[i]]
        return mask

    def subtree(self, keep: list[int]) -> DraftTree:
        """The tree restricted to ``keep`` (sorted, contains 0, closed under parents)."""
        remap = {old: new for new, old in enumerate(keep)}
        if keep[0] != 0 or any(self.parents[i] not in remap for i in keep[1:]):
            raise ValueError("subtree() needs the root and every kept node's parent.")
        return DraftTree(
            tokens=[self.tokens[i] for i in keep],
            parents=[-1] + [remap[self.parents[i]] for i in keep[1:]],
            depths=[self.depths[i] for i in keep],
            scores=[self.scores[i] for i in keep],
            proposal_probs={remap[i]: p for i, p in self.proposal_probs.items() if i in remap},
        )


def nodes_in_place(path: list[int]) -> int:
    """How many leading nodes of ``path`` (root first) are already where the cache keeps them: ``path[i] == i``.

    Verification writes node ``i`` at the ``i``-th tree slot and the accepted path is moved to the first ones, so
    these need no move: the root alone, and a chain whose nodes were numbered in order (a lookup chain verified alone,
    each first child of a chain-shaped tree)."""
    return next((i for i, node in enumerate(path) if node != i), len(path))


def full_tree_size(depth: int, top_k: int) -> int:
    """Nodes an EAGLE-2 expansion drafts with ``depth`` levels of beam ``top_k``, root included
    (``depth`` 0: the root alone, a plain decoding step)."""
    return 1 + top_k + (depth - 1) * top_k**2 if depth else 1
