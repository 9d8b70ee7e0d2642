"""Draft trees in a fixed-size :class:`~transformers.StaticCache`: the layout, its mask and its compaction.

A static cache never grows: slot ``j`` of every layer holds position ``j`` of the committed
sequence, and the layer's ``cumulative_length`` (a tensor) says where the next forward writes.
A verification forward over a tree padded to ``bucket`` rows therefore writes its rows at slots
``past_length .. past_length + bucket - 1``, right after the committed prefix. After acceptance the
accepted path is moved down to ``past_length ..`` and the length set to the end of it; what lies
beyond is stale and masked out of every later forward, which overwrites it.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from transformers import Cache, PretrainedConfig, StaticCache
from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer

from .kv_cache import check_not_offloaded
from .transfer import to_device


def check_static_cache(cache: Cache, needed_length: int, model: torch.nn.Module | None = None) -> None:
    """Refuse a static cache the tree layout cannot use, one too short for this call, or (given ``model``) one
    of fewer layers than the model or already laid out for another dtype, device or batch size.

    Args:
        needed_length: slots the call may touch (prompt + new tokens + the largest verification
            bucket).
    """
    check_not_offloaded(cache)
    for idx, layer in enumerate(cache.layers):
        if type(layer) is not StaticLayer:
            raise ValueError(
                f"Static cache layer {idx} is a {type(layer).__name__}: tree speculation on a static cache supports "
                "full-length layers (StaticLayer) only, because a sliding-window static layer rolls its slots "
                "and cannot hold a tree after the prefix. Pass cache_implementation='static' instead of a cache (the "
                "engine then keeps a cache of full-length layers, and the masks apply the sliding windows), or build "
                "one with hf_adaptive_spec.core.full_length_static_cache(model.config, max_cache_len)."
            )
    if model is not None:
        _check_cache_fits_model(cache, model)
    capacity = cache.layers[0].max_cache_len if cache.layers else 0
    if capacity < needed_length:
        raise ValueError(
            f"The static cache has max_cache_len={capacity}, but this call needs {needed_length} slots (prompt + "
            "max_new_tokens + the largest verification bucket). Pass a StaticCache with max_cache_len >= "
            f"{needed_length}, or lower max_new_tokens."
        )


def _check_cache_fits_model(cache: Cache, model: torch.nn.Module) -> None:
    layers = model.config.get_text_config().num_hidden_layers
    if len(cache.layers) < layers:
        raise ValueError(
            f"The static cache has {len(cache.layers)} layers and the model {layers}: build it from this model's "
            "config, StaticCache(config=model.config, max_cache_len=N)."
        )
    laid_out = next((layer for layer in cache.layers if getattr(layer, "is_initialized", False)), None)
    if laid_out is None:
        return
    mine = (laid_out.dtype, laid_out.device, laid_out.batch_size)
    if mine != (model.dtype, model.device, 1):
        raise ValueError(
            f"The static cache was laid out by an earlier call for batch {mine[2]} in {mine[0]} on {mine[1]}; this "
            f"call decodes batch 1 in {model.dtype} on {model.device}. A StaticCache keeps its first call's dtype, "
            "device and batch size (reset() keeps them too): pass a new StaticCache."
        )


def is_static_cache(cache: Cache | None) -> bool:
    """Whether ``cache`` is a :class:`~transformers.StaticCache` (or any cache of static layers)."""
    return isinstance(cache, StaticCache) or (
        cache is not None and bool(cache.layers) and all(isinstance(layer, StaticLayer) for layer in cache.layers)
    )


def set_cache_length(cache: Cache, length: int) -> None:
    """Make every layer's next write start at slot ``length`` (in place: compiled graphs keep the
    tensor's address)."""
    for layer in cache.layers:
        layer.cumulative_length.fill_(length)


def full_length_static_cache(config: PretrainedConfig, max_cache_len: int) -> StaticCache:
    """``StaticCache(config, max_cache_len)`` with every sliding-window layer replaced by a full-length
    :class:`StaticLayer`: slot ``j`` holds position ``j`` in every layer, so a draft tree can follow the
    prefix, and the sliding windows are applied by the masks (:func:`windowed_static_tree_masks`, and
    transformers' own for the prefill). A sliding layer then holds ``max_cache_len`` slots, not its window."""
    cache = StaticCache(config=config, max_cache_len=max_cache_len)
    cache.layers = [
        StaticLayer(max_cache_len=max_cache_len) if isinstance(layer, StaticSlidingWindowLayer) else layer
        for layer in cache.layers
    ]
    return cache


def static_tree_mask(
    visible: torch.Tensor, past_length: int, bucket: int, max_cache_len: int, dtype: torch.dtype, device
) -> torch.Tensor:
    """Additive ``[1, 1, bucket, max_cache_len]`` mask for ``n`` new rows padded to ``bucket``.

    The slots from ``past_length`` on hold a tail of ``m - n`` entries written earlier this cycle
    (a drafter's tree nodes) followed by the ``bucket`` new rows, ``n`` real ones first. Real row ``i``
    sees the committed slots ``< past_length`` and the tail entries marked in ``visible[i]``; a
    padding row sees the committed slots and itself only, so no real row ever sees a padding slot and
    a padding row can never be accepted.

    Args:
        visible: ``[n, m]`` bool over the tail and the real rows, e.g. a tree's ancestor mask
            (``m == n``) or a causal block (``torch.ones(n, n).tril()``).
    """
    return _additive(_allowed_slots(visible, past_length, bucket, max_cache_len)[None, None], dtype, device)


def windowed_static_tree_masks(
    kinds: list[tuple[str | None, int | None]], visible: torch.Tensor, positions: torch.Tensor, past_length: int,
    bucket: int, max_cache_len: int, dtype: torch.dtype, device,
) -> torch.Tensor:
    """:func:`static_tree_mask` for a tree of ``n`` rows written at slot ``past_length`` (``visible`` ``[n, n]``),
    once per attention kind of the model (``kinds``: :func:`~hf_adaptive_spec.core.attention.mask_kinds`), each with its
    sliding window applied: ``[kinds, 1, bucket, max_cache_len]`` (a model of one kind gets ``[1, 1, ...]``, the
    plain mask when it has no window). ``positions`` ``[bucket]`` are the rows' positions, padding rows included;
    committed slot ``j`` holds position ``j`` (:func:`full_length_static_cache`)."""
    allowed = _allowed_slots(visible, past_length, bucket, max_cache_len)
    if len(kinds) == 1 and kinds[0][1] is None:  # full attention only: the plain mask
        return _additive(allowed[None, None], dtype, device)
    slot_positions = torch.arange(max_cache_len, device="cpu")
    slot_positions[past_length : past_length + bucket] = positions.cpu()
    within = {window: slot_positions[None, :] > positions.cpu()[:, None] - int(window) for _, window in kinds if window}
    per_kind = torch.stack([allowed & within[window] if window else allowed for _, window in kinds])
    return _additive(per_kind[:, None], dtype, device)


def _allowed_slots(visible: torch.Tensor, past_length: int, bucket: int, max_cache_len: int) -> torch.Tensor:
    """``[bucket, max_cache_len]`` bool: which slots each row sees (see :func:`static_tree_mask`)."""
    n, m = visible.shape
    earlier = m - n
    allowed = torch.zeros(bucket, max_cache_len, dtype=torch.bool, device="cpu")
    allowed[:, :past_length] = True
    allowed[:n, past_length : past_length + m] = visible
    padding = torch.arange(n, bucket, device="cpu")
    allowed[padding, past_length + earlier + padding] = True
    return allowed


def _additive(allowed: torch.Tensor, dtype: torch.dtype, device) -> torch.Tensor:
    """0 where ``allowed``, the dtype's minimum elsewhere, on ``device`` (one copy)."""
    mask = torch.zeros(allowed.shape, dtype=dtype, device="cpu")
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return to_device(mask, device)


def compact_static_cache(cache: Cache, past_length: int, keep: torch.Tensor, in_place: int = 0) -> None:
    """Move the tree slots ``past_length + keep`` to ``past_length, past_length + 1, ...`` in every
    layer and set the committed length to ``past_length + len(keep)``.

    Args:
        keep: ``[k]`` long tensor of tree node indices (root first, ascending), on the cache's device.
        in_place: how many leading entries of ``keep`` are already in their slots (``keep[i] == i``, known on the
            host: :func:`~hf_adaptive_spec.core.tree.nodes_in_place`); they are not moved. A path that moves none
            (the root alone, a chain numbered in order) copies nothing: on a GPU, two kernels per layer fewer.
    """
    if in_place < keep.numel():
        _move_slots(cache, past_length, keep, in_place)
    set_cache_length(cache, past_length + keep.numel())


def _move_slots(cache: Cache, past_length: int, keep: torch.Tensor, in_place: int) -> None:
    """Every layer's tree slots ``past_length + keep[in_place:]`` moved to ``past_length + in_place, ...``."""
    start, end, nodes = past_length + in_place, past_length + keep.numel(), keep[in_place:]
    sources = {nodes.device: past_length + nodes}  # the slots to move, once per device (a model split across devices)
    for layer in cache.layers:
        if not layer.is_initialized:
            continue
        source = sources.get(layer.keys.device)
        if source is None:
            source = sources[layer.keys.device] = sources[nodes.device].to(layer.keys.device)
        layer.keys[:, :, start:end] = layer.keys[:, :, source]
        layer.values[:, :, start:end] = layer.values[:, :, source]


def static_cache_tensors(cache: Cache) -> tuple[torch.Tensor, ...]:
    """Every layer's keys, values and write position (``cumulative_length``), in layer order: the
    state a forward reads and updates in place, as tensors a compiled package can take as inputs."""
    return tuple(t for layer in cache.layers for t in (layer.keys, layer.values, layer.cumulative_length))


@contextmanager
def static_cache_holding(cache: Cache, tensors: tuple[torch.Tensor, ...]):
    """``cache`` with its layers' tensors replaced by ``tensors`` (as :func:`static_cache_tensors`
    orders them) inside the block, restored after: how a forward is traced with the cache as inputs."""
    saved = static_cache_tensors(cache)
    try:
        for index, layer in enumerate(cache.layers):
            layer.keys, layer.values, layer.cumulative_length = tensors[3 * index : 3 * index + 3]
        yield cache
    finally:
        for index, layer in enumerate(cache.layers):
            layer.keys, layer.values, layer.cumulative_length = saved[3 * index : 3 * index + 3]
