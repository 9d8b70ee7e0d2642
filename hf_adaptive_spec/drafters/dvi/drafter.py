"""The DVI drafter: the target's first layers plus a LoRA draft head, learning online from its outcomes."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from peft import LoraConfig
from torch import nn
from transformers import DynamicCache, PreTrainedModel

from ...core.attention import check_tree_attention_support, is_sliding_layer, tree_attention_mask, tree_extension_mask
from ...core.features import decoder_layers, unwrap_peft
from ...core.kv_cache import compact_cache, drop_tail
from ...core.split_forward import run_decoder_layers
from ...core.tree import DraftTree
from ..base import DraftContext, Drafter
from ..causal_lm import truncated_causal_lm
from .buffer import outcome_records
from .checkpoint import RECOMMENDED_DEPTH, DVICheckpointMixin
from .config import DVIOnlineConfig
from .head import DVIDraftHead, check_lora_config, lora_draft_head
from .online import DVIUpdater, UpdateMetrics



@dataclass
class _Cycle:
    """What the drafter proposed in one cycle, kept until the next one reveals what was committed."""

    committed: int  # sequence length at the cycle start (the root is token committed - 1)
    tree: DraftTree
    states: dict[int, torch.Tensor]  # h_k of every expanded node


class DVIDrafter(DVICheckpointMixin, Drafter):
    """DVI self-speculation: draft with the target's first ``exit_layer`` layers and a LoRA head.

    The draft path is the target's layers ``0 .. exit_layer-1`` (weights shared, not copied),
    then the target's final norm and ``lm_head`` with a LoRA adapter (peft). Verification is
    the unmodified target, so the output is exactly the target's. By default draft and
    verification share the target's KV cache of the first ``exit_layer`` layers: the drafter
    writes the draft nodes' K/V there, and verification runs only the remaining layers on the
    drafted states (plus the shallow layers for leaves the drafter never fed). With
    ``share_cache=False`` it keeps its own shallow cache and the target verifies with all its
    layers, like transformers' ``assistant_early_exit``.

    With ``online=True`` it learns while generating (the paper's "Improve" step): at each cycle
    it compares the previous cycle's draft with the tokens the engine committed, logs one
    :class:`~hf_adaptive_spec.drafters.dvi.DVIRecord` per drafted position up to and including
    the first reject, and every ``online_config.update_every`` records steps the LoRA weights
    with the KL→RL schedule. Nothing else changes: the target and the head's base weights stay
    bitwise equal, and the generated tokens are the target's.

    Args:
        target: the target model (a transformers causal LM, or a peft model wrapping one).
        exit_layer: number of target layers the draft path runs (``1 .. num_layers-1``).
        lora_config: peft ``LoraConfig`` of the draft head (``target_modules=['draft_head']``);
            :func:`default_lora_config` by default.
        online: learn from the drafts' outcomes during ``generate``.
        online_config: the :class:`DVIOnlineConfig` (defaults when None).
        share_cache: share the first ``exit_layer`` layers' KV cache with verification. The
            default (None) shares unless one of those layers has sliding-window attention,
            which cannot keep a draft tree next to its window exactly.

    Example:
        >>> drafter = DVIDrafter(model, exit_layer=4, online=True)
        >>> model.generate(**inputs, assistant_model=drafter, assistant_policy=StaticTreePolicy.chain(4))
        >>> drafter.freeze()  # stop learning; drafter.save_pretrained("dvi-adapter") to keep it

    One drafter serves one ``generate`` at a time: it holds the sequence's draft cache, and a
    ``generate`` in another thread that binds it makes the first one fail with a RuntimeError.
    Updates and head reads share a lock, so :meth:`update`, :meth:`save_pretrained` and
    :meth:`freeze` are safe to call from another thread.
    """

    def __init__(
        self,
        target: nn.Module,
        exit_layer: int = 4,
        *,
        lora_config: LoraConfig | None = None,
        online: bool = False,
        online_config: DVIOnlineConfig | None = None,
        share_cache: bool | None = None,
    ):
        target = unwrap_peft(target)
        check_tree_attention_support(target.config, role="target model")
        norm = getattr(target.get_decoder(), "norm", None)
        if norm is None:
            raise ValueError(
                f"DVIDrafter needs the target's final norm at `model.norm` (Llama, Mistral, Qwen, Gemma layouts); "
                f"{type(target).__name__} has none."
            )
        shallow = truncated_causal_lm(target, exit_layer).get_decoder()  # validates exit_layer
        shallow.norm = nn.Identity()  # the head applies the norm: the shallow output is h_k itself
        self.exit_layer = exit_layer
        self.shallow = shallow
        sliding = [i for i in range(exit_layer) if is_sliding_layer(target.config, i)]
        if share_cache and sliding:
            raise ValueError(
                f"DVIDrafter(share_cache=True) needs full attention in the shared layers, but layers {sliding} use a "
                "sliding window (their cache cannot hold a draft tree exactly). Pass share_cache=False."
            )
        self.share_cache = not sliding if share_cache is None else share_cache
        self.lora_config = check_lora_config(lora_config)
        self._target_name = target.config.name_or_path or None
        self.head = lora_draft_head(DVIDraftHead(norm, target.get_output_embeddings(), self._target_name), self.lora_config)
        self.updater: DVIUpdater | None = None
        self._target_lm_head = target.get_output_embeddings()
        self._num_layers = len(decoder_layers(target))
        self._target_shape = {
            "num_hidden_layers": self._num_layers,
            "hidden_size": target.config.hidden_size,
            "vocab_size": target.config.vocab_size,
        }
        self._lock = threading.RLock()
        self._frozen = False
        if online:
            self.enable_online(online_config)
        self._reset()

    # ----- online learning -------------------------------------------------------------------

    def enable_online(self, config: DVIOnlineConfig | None = None) -> DVIUpdater:
        """Start learning online with a fresh updater (empty buffer, new optimizer)."""
        with self._lock:
            self.updater = DVIUpdater(self.head, self._target_lm_head, config or DVIOnlineConfig(), self._lock)
            self._frozen = False
            self._pending = None
            return self.updater

    @property
    def online(self) -> bool:
        """Whether an updater is attached (see :meth:`enable_online`)."""
        return self.updater is not None

    @property
    def is_learning(self) -> bool:
        """Online and not frozen: records are logged and updates run."""
        return self.updater is not None and not self._frozen

    def freeze(self) -> None:
        """Stop logging and updating (the adapter keeps its current weights)."""
        with self._lock:
            self._frozen = True
            self._pending = None

    def unfreeze(self) -> None:
        """Resume online learning after :meth:`freeze`."""
        with self._lock:
            self._frozen = False

    def update(self) -> UpdateMetrics | None:
        """Run one LoRA update now (None when the buffer is empty)."""
        if self.updater is None:
            raise RuntimeError("This DVIDrafter is not online: create it with online=True or call enable_online().")
        return self.updater.step()

    @property
    def feature_layers(self) -> tuple[int, ...]:
        """The target's final-norm output (index ``num_layers``) while learning, for the target logits."""
        return (self._num_layers,) if self.is_learning else ()

    @property
    def shared_layers(self) -> int:
        """The target layers whose KV cache draft and verification share (0 without sharing)."""
        return self.exit_layer if self.share_cache else 0

    #: the paper's proposal: a chain of depth 4, ``StaticTreePolicy.chain(DVIDrafter.recommended_depth)``
    recommended_depth = RECOMMENDED_DEPTH

    # ----- the Drafter interface ---------------------------------------------------------------

    def _reset(self) -> None:
        self._cache = DynamicCache()
        self._committed = 0
        self._began = False  # the root's shallow K/V sit in the shared cache, awaiting verify()
        self._fed: list[int] = []
        self._states: dict[int, torch.Tensor] = {}
        self._tree: DraftTree | None = None
        self._fallback_tree: DraftTree | None = None
        self._pending: _Cycle | None = None
        self._owner: int | None = None

    def bind(self, target: PreTrainedModel) -> None:
        target = unwrap_peft(target)
        if decoder_layers(target)[0] is not self.shallow.layers[0]:
            raise ValueError(
                "This DVIDrafter was built from another model: its draft path shares the target's first layers. "
                "Build it from the model that generates: DVIDrafter(model) or DVIDrafter.from_pretrained(repo, target=model)."
            )
        self._reset()
        self._owner = threading.get_ident()

    def _check_owner(self) -> None:
        if self._owner != threading.get_ident():
            raise RuntimeError(
                "This DVIDrafter was bound by a generate call in another thread; a drafter serves one generate at a "
                "time. Create one DVIDrafter per concurrent generate."
            )

    def draft_log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """Draft log-probabilities ``[N, vocab]`` (float32) of the head at shallow states ``[N, hidden]``."""
        with self._lock:
            logits = self.head(states)
        return torch.log_softmax(logits.float(), dim=-1)

    @torch.no_grad()
    def begin_tree(self, context: DraftContext) -> torch.Tensor:
        self._check_owner()
        if self._pending is not None:
            self._log_outcome(context)
        if self.is_learning and self.updater.due():
            self.updater.step()
        device = self.shallow.device
        num_tokens = context.input_ids.shape[1]
        if self.share_cache:
            if context.target_cache is None:
                raise RuntimeError("DVIDrafter(share_cache=True) needs the engine's cache in DraftContext.target_cache.")
            # the target processed the committed prefix; only the root is new to the shallow layers
            self._cache, self._committed, self._began = context.target_cache, num_tokens - 1, True
        positions = torch.arange(self._committed, num_tokens, device=device)
        hidden = self.shallow(
            input_ids=context.input_ids[:, self._committed :].to(device),
            position_ids=positions[None],
            past_key_values=self._cache,
            use_cache=True,
        ).last_hidden_state
        self._committed = num_tokens
        root = hidden[0, -1].clone()
        self._states = {0: root}
        log_probs = self.draft_log_probs(root[None])
        if self.is_learning:
            # the drafted tree when no expand() follows (the drafter never sees the tree then): the
            # root's best child, exact for chains; trees of depth 1 lose their other children's records
            best_log_prob, best = log_probs[0].max(-1)
            self._fallback_tree = DraftTree.with_root(int(context.input_ids[0, -1]))
            self._fallback_tree.add_children(0, [int(best)], [float(best_log_prob)])
        return log_probs

    @torch.no_grad()
    def expand(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        self._check_owner()
        device = self.shallow.device
        mask, query_positions = tree_extension_mask(
            self.shallow.config, self._cache, tree, self._fed, nodes, self._committed - 1, self.shallow.dtype, device
        )
        hidden = self.shallow(
            input_ids=torch.tensor([[tree.tokens[node] for node in nodes]], device=device),
            attention_mask=mask,
            position_ids=query_positions[None],
            past_key_values=self._cache,
            use_cache=True,
        ).last_hidden_state[0]
        self._fed = self._fed + nodes
        self._tree = tree
        if self.is_learning or self.share_cache:
            self._states.update((node, row.clone()) for node, row in zip(nodes, hidden))
        return self.draft_log_probs(hidden)

    def end_tree(self) -> None:
        tree = self._tree if self._tree is not None else self._fallback_tree
        if self.is_learning and self._states and tree is not None:
            self._pending = _Cycle(self._committed, tree, dict(self._states))
        self._fallback_tree = None
        if not self.share_cache:  # shared: verify() reuses the fed nodes' K/V and states
            drop_tail(self._cache, len(self._fed))
            self._fed, self._states, self._tree = [], {}, None

    @torch.no_grad()
    def verify(self, target: PreTrainedModel, cache: DynamicCache, tree: DraftTree, past_length: int) -> torch.Tensor:
        """Verify ``tree`` reusing the drafted nodes' shallow K/V and states (``share_cache=True``).

        The shallow layers hold the root and the fed nodes after the committed prefix. This
        runs them for the tree's leaves, reorders their tail into ``tree``'s node order, then
        runs the remaining layers on every node's ``h_k``. Returns the final-norm output ``[n, H]``.
        """
        self._check_owner()
        target, device = unwrap_peft(target), self.shallow.device
        self._cache = cache
        tail = ([0] if self._began else []) + self._fed
        tail_paths = [self._path_tokens(self._tree, node) for node in tail]
        fed_paths = {path: slot for slot, path in enumerate(tail_paths)}
        paths = [()]
        for node in range(1, len(tree)):
            paths.append(paths[tree.parents[node]] + (tree.tokens[node],))
        leaves = [node for node in range(len(tree)) if paths[node] not in fed_paths]
        states = {node: self._states[tail[fed_paths[paths[node]]]] for node in range(len(tree)) if node not in leaves}
        if leaves:
            leaf_states = self._feed_leaves(tree, leaves, tail_paths, paths, past_length)
            states.update(zip(leaves, leaf_states))
        slot = {node: fed_paths[paths[node]] for node in states if node not in leaves}
        slot.update((node, len(tail) + j) for j, node in enumerate(leaves))
        order = torch.tensor([slot[node] for node in range(len(tree))], device=device)
        compact_cache(cache, len(tail) + len(leaves), order, layers=range(self.exit_layer))
        positions = past_length + torch.tensor(tree.depths, device=device)
        mask = tree_attention_mask(
            target.config, cache, positions, positions, tree.ancestor_mask().to(device), target.dtype, self.exit_layer
        )
        hidden = torch.stack([states[node] for node in range(len(tree))])[None]
        self._fed, self._states, self._tree, self._began = [], {}, None, False
        return run_decoder_layers(target, hidden, self.exit_layer, cache, positions[None], mask)[0]

    def _feed_leaves(
        self,
        tree: DraftTree,
        leaves: list[int],
        tail_paths: list[tuple[int, ...]],
        paths: list[tuple[int, ...]],
        past_length: int,
    ) -> torch.Tensor:
        """Shallow states ``[len(leaves), H]`` of nodes the drafter never fed; their K/V join the tail."""
        device = self.shallow.device
        visible = [[paths[leaf][: len(p)] == p for p in tail_paths] + [leaf == other for other in leaves] for leaf in leaves]
        tail_positions = torch.tensor([past_length + len(p) for p in tail_paths] + [past_length + tree.depths[n] for n in leaves], device=device)
        query_positions = tail_positions[len(tail_paths) :]
        mask = tree_attention_mask(
            self.shallow.config, self._cache, query_positions, tail_positions,
            torch.tensor(visible, dtype=torch.bool, device=device), self.shallow.dtype,
        )
        return self.shallow(
            input_ids=torch.tensor([[tree.tokens[n] for n in leaves]], device=device),
            attention_mask=mask,
            position_ids=query_positions[None],
            past_key_values=self._cache,
            use_cache=True,
        ).last_hidden_state[0]

    @staticmethod
    def _path_tokens(tree: DraftTree | None, node: int) -> tuple[int, ...]:
        if node == 0:
            return ()
        return tuple(tree.tokens[i] for i in tree.path_to(node)[1:])

    def _log_outcome(self, context: DraftContext) -> None:
        """Turn the previous cycle's draft and the newly committed tokens into buffer records."""
        pending, self._pending = self._pending, None
        if not self.is_learning:
            return
        committed = context.input_ids[0, pending.committed :].tolist()
        features = context.new_features.get(self._num_layers)
        if not committed or features is None or features.shape[1] != len(committed):
            return  # no target states for these tokens: the outcome cannot be aligned
        target_states = features[0].detach().to(self.shallow.device).clone()
        self.updater.add(outcome_records(pending.tree, pending.states, committed, target_states))

