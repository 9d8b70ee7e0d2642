"""KV cache checks and compaction to the accepted path."""

from __future__ import annotations

import torch
from transformers import Cache, DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer


def check_not_offloaded(cache: Cache) -> None:
    """Refuse a cache built with ``offloading=True`` (its layers moved to the CPU between uses, prefetched one ahead):
    trees are written, read and dropped out of layer order, which its prefetching does not follow."""
    if getattr(cache, "offloading", False):
        raise ValueError(
            f"The {type(cache).__name__} passed offloads its layers (offloading=True), which speculative decoding "
            "does not support: pass one built without offloading, or drop assistant_policy."
        )


def prepare_cache_for_trees(cache: Cache | None) -> DynamicCache:
    """Check that ``cache`` can hold and drop tree nodes, and make sliding layers keep them.

    This is the growing-cache path: :class:`~transformers.DynamicCache` with full or sliding-window
    attention layers (a :class:`~transformers.StaticCache` takes the static path,
    ``core/static_cache.py``); quantized, offloaded, linear-attention and encoder-decoder caches
    are refused with an error naming the fix.
    """
    if cache is None:
        raise ValueError("Speculative decoding needs a KV cache: do not pass use_cache=False.")
    if type(cache) is not DynamicCache:
        raise ValueError(
            f"Speculative decoding supports a DynamicCache or a StaticCache, got {type(cache).__name__}: pass one of "
            "those (or cache_implementation='static' / none) together with assistant_policy."
        )
    check_not_offloaded(cache)
    for idx, layer in enumerate(cache.layers):
        if type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer):
            raise ValueError(
                f"Cache layer {idx} is a {type(layer).__name__}; speculative decoding can only compact full and "
                "sliding-window attention layers (linear-attention / recurrent layers cannot drop tree nodes): pass "
                "a cache built from this model's config, DynamicCache(config=model.config), or, for a model with such "
                "layers, drop assistant_policy."
            )
    cache.activate_past_recording()  # sliding layers keep tree entries until compact() crops them
    return cache


def compact_cache(
    cache: DynamicCache, num_tree: int, keep: torch.Tensor, layers: range | None = None, in_place: int = 0
) -> None:
    """Keep only the tree entries ``keep`` (indices into the last ``num_tree`` slots, in order).

    Args:
        num_tree: tree entries appended by the last forward (the last slots of every layer).
        keep: ``[k]`` long tensor of tree node indices to keep, in the order they are kept.
        layers: the cache layers to compact (all by default).
        in_place: how many leading entries of ``keep`` are already in their slots (``keep[i] == i``, known on the
            host: :func:`~hf_adaptive_spec.core.tree.nodes_in_place`); they are not moved, and a path that moves none
            is a crop.
    """
    kept, moved = keep.numel(), keep[in_place:]
    for layer in cache.layers if layers is None else [cache.layers[i] for i in layers]:
        if not layer.is_initialized:
            continue
        if moved.numel():
            tree_start = layer.keys.shape[-2] - num_tree
            start, end = tree_start + in_place, tree_start + kept
            source = tree_start + moved.to(layer.keys.device)  # a model split with device_map: each layer where it runs
            layer.keys[..., start:end, :] = layer.keys[..., source, :]
            layer.values[..., start:end, :] = layer.values[..., source, :]
        layer.crop(kept - num_tree)


def drop_tail(cache: DynamicCache, num_tail: int) -> None:
    """Remove the last ``num_tail`` entries of every layer (:func:`compact_cache` keeping none of them: a crop, with
    no index to copy to the device)."""
    if num_tail > 0:
        for layer in cache.layers:
            if layer.is_initialized:
                layer.crop(-num_tail)
