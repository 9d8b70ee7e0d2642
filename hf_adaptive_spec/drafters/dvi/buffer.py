"""The rollout buffer of DVI: one record per drafted position up to and including the first reject."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ...core.tree import DraftTree


@dataclass(frozen=True)
class DVIRecord:
    """One verified drafted position (the paper's tuple ``(h_k, a, logits_phi, r, i)``).

    Args:
        draft_state: ``[hidden]`` shallow hidden state ``h_k`` the draft head read to propose
            ``token`` (the output of the first ``exit_layer`` layers at the parent position).
        token: the drafted token ``a``.
        target_state: ``[hidden]`` the target's final-norm output at the same position; the
            target logits are ``target.lm_head(target_state)``, computed when an update needs
            them (storing the state instead of the logits is 1/``vocab/hidden`` of the memory).
        reward: 1.0 when the target committed ``token`` there, 0.0 for the first reject.
        depth: position ``i`` of the token in the draft (1 = the root's child).
    """

    draft_state: torch.Tensor
    token: int
    target_state: torch.Tensor
    reward: float
    depth: int


def outcome_records(
    tree: DraftTree, draft_states: dict[int, torch.Tensor], committed: list[int], target_states: torch.Tensor,
    drafted_nodes: int | None = None,
) -> list[DVIRecord]:
    """Records of one cycle: the drafted positions along the committed tokens, up to the first reject.

    Walks the draft ``tree`` from the root along ``committed`` (the tokens the engine committed
    after the root: the accepted path, then the target's own next token). At each position
    whose parent has drafted children, the child with the committed token gives a reward-1
    record and the walk continues; if none matches, the drafter's best-scoring child gives the
    reward-0 record of the first reject and the walk stops. Positions after the first reject
    (or below an undrafted node) were never verified and produce nothing.

    Args:
        tree: the drafted tree (before any pruning for verification), root = node 0.
        draft_states: ``h_k`` of every node the drafter expanded, ``[hidden]`` each.
        committed: token ids committed after the root, in order.
        target_states: ``[len(committed), hidden]`` target final-norm outputs at the root and
            at each committed token but the last (the positions predicting ``committed``).
        drafted_nodes: the drafter's nodes are those numbered below it (a prompt-lookup chain grafted
            onto the tree is numbered after them, and is not the drafter's); None: all of them.
    """
    records: list[DVIRecord] = []
    node, drafted_nodes = 0, len(tree) if drafted_nodes is None else drafted_nodes
    for depth, token in enumerate(committed, start=1):
        children = [child for child in tree.children(node) if child < drafted_nodes]
        if not children or node not in draft_states:
            break
        match = next((child for child in children if tree.tokens[child] == token), None)
        state, target = draft_states[node], target_states[depth - 1]
        if match is None:
            best = max(children, key=lambda child: tree.scores[child])
            records.append(DVIRecord(state, tree.tokens[best], target, 0.0, depth))
            break
        records.append(DVIRecord(state, token, target, 1.0, depth))
        node = match
    return records


class RolloutBuffer:
    """A bounded FIFO of :class:`DVIRecord`; the oldest records are dropped first.

    Args:
        capacity: the most records held.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"RolloutBuffer capacity must be >= 1, got {capacity}.")
        self.capacity = capacity
        self._records: deque[DVIRecord] = deque(maxlen=capacity)
        self.total_added = 0  # records ever added, dropped ones included

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[DVIRecord]:
        return iter(self._records)

    def add(self, records: list[DVIRecord]) -> None:
        self._records.extend(records)
        self.total_added += len(records)

    def newest(self, count: int) -> list[DVIRecord]:
        """The ``count`` most recent records still held (fewer if the buffer holds fewer)."""
        count = min(count, len(self._records))
        return list(self._records)[len(self._records) - count :]

    def sample(self, count: int, generator: torch.Generator) -> list[DVIRecord]:
        """``count`` records drawn uniformly without replacement (all of them if fewer)."""
        if count >= len(self._records):
            return list(self._records)
        records = list(self._records)
        picks = torch.randperm(len(records), generator=generator, device="cpu")[:count]
        return [records[i] for i in sorted(picks.tolist())]

    def clear(self) -> None:
        self._records.clear()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The held records as stacked tensors (``[N, hidden]`` states, ``[N]`` fields), oldest first, and
        ``total_added``: what a checkpoint saves (safetensors) so that a resumed run samples the same records."""
        records = list(self._records)
        return {
            "draft_states": torch.stack([r.draft_state for r in records]) if records else torch.zeros(0, 0),
            "target_states": torch.stack([r.target_state for r in records]) if records else torch.zeros(0, 0),
            "tokens": torch.tensor([r.token for r in records], dtype=torch.int64),
            "rewards": torch.tensor([r.reward for r in records], dtype=torch.float64),
            "depths": torch.tensor([r.depth for r in records], dtype=torch.int64),
            "total_added": torch.tensor(self.total_added, dtype=torch.int64),
        }

    def load_state_dict(self, state: dict[str, torch.Tensor], device: torch.device | str = "cpu") -> None:
        """Replace the records with those of :meth:`state_dict` (their states moved to ``device``)."""
        draft_states, target_states = state["draft_states"].to(device), state["target_states"].to(device)
        self._records.clear()
        self._records.extend(
            DVIRecord(draft_states[i], int(token), target_states[i], float(reward), int(depth))
            for i, (token, reward, depth) in enumerate(
                zip(state["tokens"].tolist(), state["rewards"].tolist(), state["depths"].tolist())
            )
        )
        self.total_added = int(state["total_added"])
