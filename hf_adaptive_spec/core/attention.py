"""Tree attention masks over a KV cache, for full and sliding-window layers."""

from __future__ import annotations

import torch
from transformers import Cache, PretrainedConfig

from .transfer import to_device
from .tree import DraftTree

#: attention implementations that honour an additive 4D float mask (flash kernels take 2D
#: masks only; flex attention is unverified on CPU).
TREE_MASK_ATTENTION = ("sdpa", "eager")


#: model types whose attention always uses ALiBi (Falcon has it as the ``alibi`` option)
ALIBI_MODEL_TYPES = frozenset({"bloom", "mpt"})


#: the layer kinds (``config.layer_types``) whose attention takes a tree mask and whose cache a tree is written into
TREE_LAYER_TYPES = frozenset({"full_attention", "sliding_attention"})


def check_tree_attention_support(config: PretrainedConfig, role: str = "model") -> None:
    """Raise when the model's attention kernel cannot take a tree mask, or its positions do not come from
    ``position_ids`` (ALiBi biases)."""
    if getattr(config, "alibi", False) or config.model_type in ALIBI_MODEL_TYPES:
        raise ValueError(
            f"The {role} ({config.model_type}) uses ALiBi position biases, which it derives from the attention "
            "mask's layout rather than from position_ids, so a draft tree's nodes would not get their depths as "
            "positions: tree speculation does not support it. Drop assistant_policy for stock generate (or "
            "transformers' own assisted generation)."
        )
    other_kinds = sorted(set(getattr(config, "layer_types", None) or []) - TREE_LAYER_TYPES)
    if other_kinds:
        raise ValueError(
            f"The {role} ({config.model_type}) has layers of kind {other_kinds}: tree speculation writes a tree into "
            f"the cache of full or sliding-window attention layers and masks it ({sorted(TREE_LAYER_TYPES)}), which "
            "chunked, recurrent or compressed layers do not take. Drop assistant_policy for stock generate (or "
            "transformers' own assisted generation)."
        )
    implementation = getattr(config, "_attn_implementation", None) or "eager"
    if implementation not in TREE_MASK_ATTENTION:
        raise ValueError(
            f"The {role} uses attn_implementation={implementation!r}, which cannot take the 4D tree attention "
            f"mask speculative decoding needs. Load it with attn_implementation='sdpa' (or 'eager'), or call "
            f"`model.set_attn_implementation('sdpa')`. Supported: {', '.join(TREE_MASK_ATTENTION)}."
        )


def is_sliding_layer(config: PretrainedConfig, layer_idx: int) -> bool:
    """Whether decoder layer ``layer_idx`` uses sliding-window attention."""
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None)
    return window is not None and (not layer_types or "sliding" in layer_types[layer_idx])


def _mask_groups(config: PretrainedConfig, first_layer: int = 0) -> list[tuple[str | None, int, int | None]]:
    """(mask key, a layer index of that kind, sliding window or None) per distinct attention kind
    among layers ``first_layer`` and up."""
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None)
    if layer_types and len(set(layer_types)) > 1:
        first_of_kind: dict[str, int] = {}
        for idx, layer_type in enumerate(layer_types[first_layer:], start=first_layer):
            first_of_kind.setdefault(layer_type, idx)
        return [(kind, idx, window if "sliding" in kind else None) for kind, idx in first_of_kind.items()]
    return [(None, first_layer, window if is_sliding_layer(config, 0) else None)]


def mask_kinds(config: PretrainedConfig) -> list[tuple[str | None, int | None]]:
    """``(key, sliding window or None)`` per attention kind of the model's layers, in the order of
    :func:`attention_mask_argument`; the key is None for a model whose layers are all of one kind."""
    return [(key, window) for key, _, window in _mask_groups(config)]


def attention_mask_argument(config: PretrainedConfig, masks: torch.Tensor) -> torch.Tensor | dict[str, torch.Tensor]:
    """What the model's forward takes for ``masks`` ``[kinds, 1, q, k]`` (one per :func:`mask_kinds`): the mask
    itself for a model of one kind, else ``{layer type: its mask}``. Traceable, so a compiled forward or a
    package takes one tensor whatever the model."""
    kinds = mask_kinds(config)
    if len(kinds) == 1:
        return masks
    return {key: masks[index : index + 1] for index, (key, _) in enumerate(kinds)}


def _layer_mask(
    cache: Cache,
    layer_idx: int,
    window: int | None,
    query_positions: torch.Tensor,
    tail_positions: torch.Tensor,
    tail_visible: torch.Tensor,
    dtype: torch.dtype,
) -> torch.Tensor:
    device = query_positions.device
    num_new = query_positions.numel()
    kv_length, kv_offset = cache.get_mask_sizes(num_new, layer_idx)
    num_context = kv_length - tail_positions.numel()
    if num_context < 0:
        raise ValueError(
            "The draft tree holds more tokens than a sliding-window cache layer returns; use a smaller tree "
            "(total_tokens below the sliding window)."
        )
    # committed context occupies cache slots == positions; the kv window starts at kv_offset
    key_positions = torch.cat([kv_offset + torch.arange(num_context, device=device), tail_positions])
    allowed = torch.cat([torch.ones(num_new, num_context, dtype=torch.bool, device=device), tail_visible], dim=1)
    if window is not None:
        allowed &= key_positions[None, :] > query_positions[:, None] - int(window)
    mask = torch.zeros(num_new, kv_length, dtype=dtype, device=device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def tree_attention_mask(
    config: PretrainedConfig,
    cache: Cache,
    query_positions: torch.Tensor,
    tail_positions: torch.Tensor,
    tail_visible: torch.Tensor,
    dtype: torch.dtype,
    first_layer: int = 0,
) -> torch.Tensor | dict[str, torch.Tensor]:
    """Additive attention mask for ``n`` new tokens appended to ``cache``.

    The cache holds committed context followed by a *tail* of earlier tree nodes; the new
    tokens are appended after it. Every new token sees the whole committed context (within
    its layer's sliding window) and the tail entries marked in ``tail_visible``.

    Args:
        query_positions: ``[n]`` absolute positions of the new tokens.
        tail_positions: ``[m]`` positions of the last ``m`` kv entries (old tree nodes, then
            the ``n`` new tokens), ``m >= n``.
        tail_visible: ``[n, m]`` bool, True where a new token may attend to a tail entry.
        dtype: the model's compute dtype.
        first_layer: the mask is for layers ``first_layer`` and up (a split forward whose
            earlier layers hold more cache entries); their cache lengths size the mask.

    Returns:
        ``[1, 1, n, kv_len]`` float mask (0 or ``finfo.min``), or a dict of them keyed by layer
        type for models mixing full and sliding attention layers.
    """
    masks = {
        key: _layer_mask(cache, idx, window, query_positions, tail_positions, tail_visible, dtype)
        for key, idx, window in _mask_groups(config, first_layer)
    }
    return masks.get(None, masks)


def tail_visibility(tree: DraftTree, fed: list[int], nodes: list[int]) -> torch.Tensor:
    """``[len(nodes), len(fed) + len(nodes)]`` bool: which of ``fed + nodes`` each new node sees
    (its ancestors and itself)."""
    ancestors = [set(tree.path_to(node)) for node in nodes]
    return torch.tensor([[t in anc for t in fed + nodes] for anc in ancestors], dtype=torch.bool, device="cpu")


def tree_extension_mask(
    config: PretrainedConfig,
    cache: Cache,
    tree: DraftTree,
    fed: list[int],
    nodes: list[int],
    root_position: int,
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[torch.Tensor | dict[str, torch.Tensor], torch.Tensor]:
    """Mask and positions for feeding tree ``nodes`` to a drafter's cache.

    The cache holds the committed prefix followed by the tree nodes ``fed`` earlier in this
    cycle; each new node sees its own ancestors among them (and itself), at position
    ``root_position + depth``.

    Returns:
        ``(mask, query_positions)``: the mask of :func:`tree_attention_mask` and ``[len(nodes)]``.
    """
    tail = fed + nodes
    # copies that do not wait for the device's queued work (fresh pageable tensors, staged before the call returns)
    visible = to_device(tail_visibility(tree, fed, nodes), device)
    tail_positions = to_device(torch.tensor([root_position + tree.depths[t] for t in tail], device="cpu"), device)
    query_positions = tail_positions[len(fed) :]
    return tree_attention_mask(config, cache, query_positions, tail_positions, visible, dtype), query_positions
