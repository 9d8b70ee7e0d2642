"""A drafter's forward steps at fixed shapes, as the engine's static path verifies: the draft model's
KV in a fixed-size :class:`~transformers.StaticCache`, every step padded to a bucket size, optionally
compiled (one graph per bucket and step kind). Steps longer than the largest bucket (the prompt after
prefill) run eagerly, unpadded, on the same cache."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import torch
from transformers import PretrainedConfig, StaticCache

from .attention import tail_visibility
from .compiled import CompiledForward
from .static_cache import set_cache_length, static_tree_mask
from .transfer import to_device
from .tree import DraftTree

#: rows per draft step are padded to the smallest of these that fits (a cycle's first step: the
#: accepted tokens; later steps: a tree level's frontier).
DRAFT_BUCKETS = (4, 8, 16)


def _pad_rows(rows: torch.Tensor, bucket: int) -> torch.Tensor:
    """``[1, n, ...]`` padded to ``[1, bucket, ...]`` by repeating the last row (padding rows are
    masked from every real row and their outputs dropped, so their content does not matter).
    Always fresh standard strides: a compiled graph guards on strides, and a slice of the growing sequence has
    the sequence's length as its stride, which recompiled the step at every new length."""
    pad = bucket - rows.shape[1]
    return (
        torch.cat([rows, rows[:, -1:].expand(1, pad, *rows.shape[2:])], dim=1)
        if pad
        else rows.clone(memory_format=torch.contiguous_format)
    )


def tree_level_rows(tree: DraftTree, fed: list[int], nodes: list[int], root_position: int, device: torch.device):
    """A tree level's step: its tokens ``[1, n]`` and positions ``[n]`` (the root's plus each node's depth), on
    ``device``, and which of ``fed + nodes`` each node sees ``[n, len(fed) + n]`` (on the host, as
    :meth:`StaticDraftSteps.run` takes it). Tokens and positions are one copy that does not wait for the device's
    queued work (a fresh pageable tensor, staged before the call returns); :meth:`StaticDraftSteps.run` pads them
    into fresh tensors, so no view of it reaches a compiled graph."""
    rows = torch.tensor([[tree.tokens[node] for node in nodes], [root_position + tree.depths[node] for node in nodes]],
                        device="cpu")
    rows = to_device(rows, device)
    return rows[:1], rows[1], tail_visibility(tree, fed, nodes)


class StaticDraftSteps:
    """Runs ``step`` on rows written after the committed prefix of a fixed-size cache.

    Args:
        step: ``step(*constants, *rows, position_ids, mask, cache, output_rows)`` returning a tuple of
            tensors with the rows first: every row's (``[bucket, ...]``) when ``output_rows`` is None, else
            the rows it indexes (a ``[1]`` long tensor: the last real row); ``constants`` select the graph
            with the bucket.
        config: the draft model's config (the cache's layers, heads and sizes).
        device, dtype: the draft model's (of the attention masks).
        max_length: the longest sequence of the ``generate`` call; the cache also holds one cycle's
            tree nodes (``tree_room``) and a padded step after them.
        compile_options: ``torch.compile`` kwargs, or None to run the same shapes eagerly.
    """

    def __init__(self, step: Callable, config: PretrainedConfig, device: torch.device, dtype: torch.dtype,
                 max_length: int, compile_options: dict | None, tree_room: int = 256):
        self.step, self.device, self.dtype, self.tree_room = step, device, dtype, tree_room
        self.max_cache_len = -(-self.slots_needed(max_length) // 256) * 256
        # allocated by the first step, which runs eagerly: from the keys and values the model really writes (a
        # config's heads and head_dim do not say them for multi-query Falcon or DeepSeek's latent attention), and
        # outside a compiled graph, which would allocate them unmarked as static addresses (on CUDA, in the
        # CUDA-graph pool that the next replay overwrites)
        self.cache = StaticCache(config=config, max_cache_len=self.max_cache_len)
        self.compiled = CompiledForward(step, compile_options) if compile_options is not None else None
        self.compile_time = 0.0
        self._cache_allocated = False  # set once the first (eager) step has allocated the cache
        self._last_rows: dict[int, torch.Tensor] = {}  # n -> [n - 1] on the device (see _last_row)

    def slots_needed(self, max_length: int) -> int:
        """Slots a call of ``max_length`` can write: its sequence, one cycle's tree nodes after it and a padded step."""
        return max_length + self.tree_room + DRAFT_BUCKETS[-1]

    @property
    def freezes(self) -> bool:
        """Whether the compiled steps hold the weights they were compiled with (inductor's freezing)."""
        return self.compiled is not None and self.compiled.freezes

    @property
    def made_in_inference_mode(self) -> bool:
        """Whether the cache holds inference tensors (built under ``torch.inference_mode``): outside that mode a
        step's in-place writes into them are refused."""
        return any(layer.cumulative_length.is_inference() for layer in self.cache.layers)

    def fits(self, max_length: int, compile_options: dict | None) -> bool:
        """Whether this runner serves a call of ``max_length`` with ``compile_options`` (else build a new one)."""
        options = self.compiled.options if self.compiled is not None else None
        return self.max_cache_len >= self.slots_needed(max_length) and options == compile_options

    def run(self, kind: Hashable, constants: tuple, rows: tuple[torch.Tensor, ...], positions: torch.Tensor,
            visible: torch.Tensor, past_length: int, last_row_only: bool = False) -> tuple[torch.Tensor, ...]:
        """One step of ``kind`` (a graph per bucket and kind) over ``n`` rows (each of ``rows`` is ``[1, n, ...]``,
        ``positions`` ``[n]``) written after ``past_length`` slots plus the tail ``visible`` spans (``[n, m]``, see
        :func:`~hf_adaptive_spec.core.static_cache.static_tree_mask`). Returns the real rows of
        each of ``step``'s outputs, or with ``last_row_only`` the last one's alone (``[1, ...]``): a
        step over committed tokens needs the drafter's head on its last row only, and on the others of
        a padded bucket it cost more than the layer itself (EAGLE-3 in bfloat16 on two AVX2 cores: 13.0 ms of
        drafting per cycle with the head on every row, 7.5 ms with the last row's; results/README.md)."""
        n, m = visible.shape
        start = past_length + m - n
        bucket = next((b for b in DRAFT_BUCKETS if n <= b), n)  # longer steps run eagerly, unpadded
        if start + bucket > self.max_cache_len:
            raise ValueError(
                f"The drafter's static cache ({self.max_cache_len} slots) cannot hold a step at slot {start}: a draft "
                "tree this large is not supported on the static path; use a smaller tree."
            )
        padded = tuple(_pad_rows(r, bucket) for r in rows)
        position_ids = to_device(_pad_rows(positions[None], bucket), self.device)
        mask = static_tree_mask(visible, past_length, bucket, self.max_cache_len, self.dtype, self.device)
        set_cache_length(self.cache, start)
        output_rows = self._last_row(n) if last_row_only else None
        args = (*constants, *padded, position_ids, mask, self.cache, output_rows)
        if self.compiled is None or bucket not in DRAFT_BUCKETS or not self._cache_allocated:
            outputs = self.step(*args)
            self._cache_allocated = self._cache_allocated or self.cache.is_initialized
        else:
            outputs, seconds = self.compiled((bucket, kind), *args)
            self.compile_time += seconds
        return tuple(outputs) if last_row_only else tuple(output[:n] for output in outputs)

    def _last_row(self, n: int) -> torch.Tensor:
        """``[n - 1]`` (long) on the device, with no copy that waits for the device's queued work: for a bucketed step
        written there by a fill the first time, the same tensor after (only read: a graph input of offset 0); for a
        longer one (a prompt, once a call) a fresh host tensor's copy, so that the kept ones stay few."""
        if n > DRAFT_BUCKETS[-1]:
            return to_device(torch.tensor([n - 1], device="cpu"), self.device)
        if n not in self._last_rows:
            self._last_rows[n] = torch.full((1,), n - 1, dtype=torch.long, device=self.device)
        return self._last_rows[n]
