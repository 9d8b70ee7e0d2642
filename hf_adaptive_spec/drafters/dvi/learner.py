"""DVI's online learning during ``generate`` (the paper's "Improve" step): each cycle's draft and what
the target kept of it become rollout records, and the LoRA head steps when enough have arrived."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from torch import nn

from ...core.tree import DraftTree
from ..base import DraftOutcome
from .buffer import outcome_records
from .config import DVIOnlineLearnerConfig
from .online import DVIUpdater


@dataclass
class _Draft:
    """What the drafter proposed in one cycle, kept until the engine reports the outcome: the tree it expanded
    (None when it expanded none: the outcome's tree then shows what it drafted below the root) and how many of
    its nodes it drafted (the engine grafts a prompt-lookup chain onto the same tree afterwards)."""

    tree: DraftTree | None
    states: dict[int, torch.Tensor]  # h_k of every expanded node
    drafted_nodes: int


class DVIOnlineLearner:
    """Logs the drafter's outcomes and runs its updates.

    Args:
        head: the LoRA draft head.
        target_lm_head: the target's output projection (for the target logits of the KL term).
        final_index: the ``hidden_states`` index of the target's final-norm output.
        lock: the drafter's lock, held by updates and head reads alike.
    """

    def __init__(self, head: nn.Module, target_lm_head: nn.Module, final_index: int, lock: threading.RLock):
        self.head, self.target_lm_head, self.final_index, self.lock = head, target_lm_head, final_index, lock
        self.updater: DVIUpdater | None = None
        self.frozen = False
        self._draft: _Draft | None = None

    def enable(self, config: DVIOnlineLearnerConfig | None) -> DVIUpdater:
        """Start learning with a fresh updater (empty buffer, new optimizer)."""
        with self.lock:
            self.updater = DVIUpdater(self.head, self.target_lm_head, config or DVIOnlineLearnerConfig(), self.lock)
            self.frozen, self._draft = False, None
            return self.updater

    @property
    def is_learning(self) -> bool:
        """Online and not frozen: records are logged and updates run."""
        return self.updater is not None and not self.frozen

    def freeze(self) -> None:
        with self.lock:
            self.frozen, self._draft = True, None

    def unfreeze(self) -> None:
        with self.lock:
            self.frozen = False

    def step_if_due(self) -> None:
        if self.is_learning and self.updater.due():
            self.updater.step()

    def remember(self, tree: DraftTree | None, states: dict[int, torch.Tensor]) -> None:
        """Keep this cycle's draft (the tree it expanded, None when it expanded no node, and the expanded
        states) for :meth:`observe`."""
        drafted = len(tree) if tree is not None else 0
        self._draft = _Draft(tree, dict(states), drafted) if self.is_learning and states else None

    def observe(self, outcome: DraftOutcome) -> None:
        """Turn the remembered draft and the committed tokens into buffer records."""
        draft, self._draft = self._draft, None
        if draft is None or not self.is_learning:
            return
        features = outcome.target_features.get(self.final_index)
        if features is None or features.shape[1] != len(outcome.committed_tokens):
            raise ValueError(
                f"A DVI outcome needs the target's final-norm states (index {self.final_index}) at the root and every "
                f"accepted node, one per committed token ({len(outcome.committed_tokens)}); got "
                f"{None if features is None else tuple(features.shape)}."
            )
        target_states = features[0].detach().to(self.head_device).clone()
        if draft.tree is not None:
            tree, drafted = draft.tree, draft.drafted_nodes
        else:  # only the root's children were drafted (sampled or not), as verification saw them
            tree = outcome.tree
            drafted = len(tree) if outcome.drafter_nodes is None else outcome.drafter_nodes
        self.updater.add(outcome_records(tree, draft.states, outcome.committed_tokens, target_states, drafted))

    @property
    def head_device(self) -> torch.device:
        return next(self.head.parameters()).device
