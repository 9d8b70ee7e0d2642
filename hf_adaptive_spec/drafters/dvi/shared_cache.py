"""DVI's cache-shared verification: the target verifies a tree through the K/V and states that the
drafter's shallow layers (the target's own first layers) already computed in the engine's cache."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache, PreTrainedModel

from ...core.attention import tail_visibility, tree_attention_mask
from ...core.features import unwrap_peft
from ...core.kv_cache import compact_cache
from ...core.split_forward import run_decoder_layers
from ...core.tree import DraftTree
from ..base import SharedCacheVerification


@dataclass
class DraftedNodes:
    """One cycle's nodes in the shallow layers' cache, in the order their K/V follow the prefix.

    ``root_fed``: the root's K/V are there (the shared cache's cycles start with it); ``fed``: the
    nodes :meth:`~hf_adaptive_spec.drafters.dvi.DVIDrafter.expand` ran, in order; ``states``: the
    shallow output ``h_k`` of the root and the fed nodes; ``tree``: the drafted tree they belong to.
    """

    root_fed: bool = False
    fed: list[int] = field(default_factory=list)
    states: dict[int, torch.Tensor] = field(default_factory=dict)
    tree: DraftTree | None = None

    def tail(self) -> list[int]:
        """The drafted tree's nodes whose K/V follow the committed prefix, in cache order."""
        return ([0] if self.root_fed else []) + self.fed


def _token_paths(tree: DraftTree) -> list[tuple[int, ...]]:
    """Each node's tokens from the root's child down to it (the root's: ``()``)."""
    paths: list[tuple[int, ...]] = [()]
    for node in range(1, len(tree)):
        paths.append(paths[tree.parents[node]] + (tree.tokens[node],))
    return paths


class DVISharedCache(SharedCacheVerification):
    """Verification reusing what the DVI drafter fed through the shared layers.

    The pruned tree's nodes are matched to the drafted ones by their token paths, one node per fed
    slot; the others (nodes the drafter never fed, and sampled siblings repeating a token already
    drawn) are the leaves, which run the shallow layers now. The shared layers' tail is then
    reordered into the tree's node order and the remaining layers run on every node's ``h_k``.

    Args:
        shallow: the drafter's shallow decoder (the target's first ``layers`` layers).
        layers: the number of shared layers.
        drafted: returns the current cycle's :class:`DraftedNodes` (and forgets them).
        check_owner: raises if another thread's ``generate`` holds the drafter.
        required: the user asked for sharing (``DVIDrafter(share_cache=True)``).
    """

    how_to_disable = "pass share_cache=False to DVIDrafter (it shares by default where its layers allow it)"

    def __init__(self, shallow: torch.nn.Module, layers: int, drafted: Callable[[], DraftedNodes],
                 check_owner: Callable[[], None], required: bool = False):
        self.shallow, self.layers, self.required = shallow, layers, required
        self._drafted, self._check_owner = drafted, check_owner

    @torch.no_grad()
    def verify(self, target: PreTrainedModel, cache: DynamicCache, tree: DraftTree, past_length: int) -> torch.Tensor:
        self._check_owner()
        target, device = unwrap_peft(target), self.shallow.device
        drafted = self._drafted()
        tail = drafted.tail()
        drafted_paths = _token_paths(drafted.tree) if drafted.tree is not None else [()]
        tail_paths = [drafted_paths[node] for node in tail]
        slot, leaves = _fed_slots(tree, tail_paths)
        states = {node: drafted.states[tail[index]] for node, index in slot.items()}
        if leaves:
            states.update(zip(leaves, self._feed_leaves(cache, tree, leaves, slot, tail_paths, past_length)))
        slot.update((node, len(tail) + j) for j, node in enumerate(leaves))
        order = torch.tensor([slot[node] for node in range(len(tree))], device=device)
        compact_cache(cache, len(tail) + len(leaves), order, layers=range(self.layers))
        positions = past_length + torch.tensor(tree.depths, device=device)
        mask = tree_attention_mask(
            target.config, cache, positions, positions, tree.ancestor_mask().to(device), target.dtype, self.layers
        )
        hidden = torch.stack([states[node] for node in range(len(tree))])[None]
        return run_decoder_layers(target, hidden, self.layers, cache, positions[None], mask)[0]

    def _feed_leaves(self, cache: DynamicCache, tree: DraftTree, leaves: list[int], slot: dict[int, int],
                     tail_paths: list[tuple[int, ...]], past_length: int) -> torch.Tensor:
        """Shallow states ``[len(leaves), H]`` of the nodes without a fed slot; their K/V join the tail. Each sees
        its ancestors once: the fed slots they hold (``slot``; a slot no verified node holds is seen by none), the
        leaves among them, and itself."""
        device = self.shallow.device
        holders = [-1] * len(tail_paths)
        for node, index in slot.items():
            holders[index] = node
        visible = tail_visibility(tree, holders, leaves)
        tail_positions = torch.tensor(
            [past_length + len(p) for p in tail_paths] + [past_length + tree.depths[n] for n in leaves], device=device
        )
        query_positions = tail_positions[len(tail_paths) :]
        mask = tree_attention_mask(
            self.shallow.config, cache, query_positions, tail_positions,
            visible.to(device), self.shallow.dtype,
        )
        return self.shallow(
            input_ids=torch.tensor([[tree.tokens[n] for n in leaves]], device=device),
            attention_mask=mask,
            position_ids=query_positions[None],
            past_key_values=cache,
            use_cache=True,
        ).last_hidden_state[0]


def _fed_slots(tree: DraftTree, tail_paths: list[tuple[int, ...]]) -> tuple[dict[int, int], list[int]]:
    """Each verified node's slot among the fed ones (``tail_paths``: their token paths, in cache order), matched by
    token path, one node per slot: a node's shallow K/V and state depend on its whole token path (after the
    committed prefix) alone, so any fed node of a path stands for any verified node of it. The nodes left without
    one are the leaves, fed now: nodes the drafter never expanded, and, in a sampled tree, siblings drawing a token
    already drawn (one slot each)."""
    free: dict[tuple[int, ...], list[int]] = {}
    for index, path in enumerate(tail_paths):
        free.setdefault(path, []).append(index)
    paths = _token_paths(tree)
    slot, leaves = {}, []
    for node in range(len(tree)):
        indices = free.get(paths[node])
        if indices:
            slot[node] = indices.pop(0)
        else:
            leaves.append(node)
    return slot, leaves
