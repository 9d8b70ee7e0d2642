"""EAGLE-3 drafting with fixed shapes: the draft layer's KV in a StaticCache, every step padded to a
bucket size, optionally compiled (one graph per bucket and step kind), as the engine's static path
verifies. Steps longer than the largest bucket (the prompt after prefill) run eagerly on the same
cache."""

from __future__ import annotations

import torch
from transformers import StaticCache

from ...core.compiled import CompiledForward
from ...core.static_cache import set_cache_length, static_tree_mask
from .modeling import Eagle3DraftModel

#: rows per draft step are padded to the smallest of these that fits (begin: accepted tokens; expand: frontier).
DRAFT_BUCKETS = (4, 8, 16)


def _draft_step(model: Eagle3DraftModel, input_ids, hidden, target_features: bool, position_ids, mask, cache):
    """Pre-norm outputs ``[1, B, H]`` and draft log-probs ``[B, draft_vocab]`` (float32) of one step."""
    out = model(
        input_ids, hidden, target_features=target_features, position_ids=position_ids, attention_mask=mask,
        past_key_values=cache, compute_logits=False,
    )
    prenorm = out.prenorm_hidden_states
    return prenorm, torch.log_softmax(model.lm_head(model.norm(prenorm[0])).float(), dim=-1)


class StaticDraftRunner:
    """Runs :class:`Eagle3DraftModel` steps in a fixed-size cache at padded, static shapes.

    Args:
        model: the draft model.
        max_length: the longest sequence of the ``generate`` call; the cache also holds one
            cycle's tree nodes and a padded step after it.
        compile_options: ``torch.compile`` kwargs, or None to run the same shapes eagerly.
    """

    def __init__(self, model: Eagle3DraftModel, max_length: int, compile_options: dict | None, tree_room: int = 256):
        self.model = model
        self.max_cache_len = -(-(max_length + tree_room + DRAFT_BUCKETS[-1]) // 256) * 256
        self.cache = StaticCache(config=model.config, max_cache_len=self.max_cache_len)
        self.compiled = CompiledForward(_draft_step, compile_options) if compile_options is not None else None
        self.compile_time = 0.0

    def step(self, input_ids, hidden, target_features: bool, positions: torch.Tensor, visible: torch.Tensor,
             past_length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One draft step of ``n`` rows written after ``past_length`` slots plus the tail ``visible``
        spans (``[n, m]``, see :func:`~hf_adaptive_spec.core.static_cache.static_tree_mask`).

        Returns the real rows' pre-norm outputs ``[n, H]`` and log-probs ``[n, draft_vocab]``.
        """
        n, m = visible.shape
        start = past_length + m - n
        bucket = next((b for b in DRAFT_BUCKETS if n <= b), n)  # longer steps run eagerly, unpadded
        if start + bucket > self.max_cache_len:
            raise ValueError(
                f"The EAGLE-3 drafter's static cache ({self.max_cache_len} slots) cannot hold a step at slot {start}: "
                "a draft tree this large is not supported on the static path; use a smaller tree."
            )
        device, pad = self.model.device, bucket - n
        input_ids = torch.cat([input_ids, input_ids[:, -1:].expand(1, pad)], dim=1)
        hidden = torch.cat([hidden, hidden.new_zeros(1, pad, hidden.shape[-1])], dim=1)
        positions = torch.cat([positions, positions[-1:].expand(pad)])[None].to(device)
        mask = static_tree_mask(visible, past_length, bucket, self.max_cache_len, self.model.dtype, device)
        set_cache_length(self.cache, start)
        args = (self.model, input_ids, hidden, target_features, positions, mask, self.cache)
        if self.compiled is None or bucket not in DRAFT_BUCKETS:
            prenorm, log_probs = _draft_step(*args)
        else:
            (prenorm, log_probs), seconds = self.compiled((bucket, target_features), *args)
            self.compile_time += seconds
        return prenorm[0, :n], log_probs[:n]
