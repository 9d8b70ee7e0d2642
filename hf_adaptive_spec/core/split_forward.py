"""Running a segment of a decoder's layers by hand, on a cache shared with the full model."""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel

from .features import decoder_layers


def run_decoder_layers(
    model: PreTrainedModel,
    hidden: torch.Tensor,
    start: int,
    cache: DynamicCache,
    position_ids: torch.LongTensor,
    attention_mask: torch.Tensor | dict[str, torch.Tensor],
) -> torch.Tensor:
    """Layers ``start ..`` of ``model``'s decoder on ``hidden`` ``[1, n, H]``, then its final norm.

    ``attention_mask`` is one additive mask for every layer, or a dict keyed by the config's
    ``layer_types`` (as :func:`~hf_adaptive_spec.core.attention.tree_attention_mask` returns it
    with ``first_layer=start``). The layers append their K/V to ``cache``. Returns the final
    norm's output ``[1, n, H]``.
    """
    decoder = model.get_decoder()
    position_embeddings = decoder.rotary_emb(hidden, position_ids=position_ids)
    layer_types = getattr(model.config, "layer_types", None)
    for index, layer in enumerate(decoder_layers(model)[start:], start=start):
        mask = attention_mask[layer_types[index]] if isinstance(attention_mask, dict) else attention_mask
        out = layer(
            hidden,
            attention_mask=mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=True,
            position_embeddings=position_embeddings,
        )
        hidden = out[0] if isinstance(out, tuple) else out
    return decoder.norm(hidden)
