"""EAGLE-3's draft step at fixed shapes (see :class:`~hf_adaptive_spec.core.static_steps.StaticDraftSteps`)."""

from __future__ import annotations

import torch

from ...core.static_steps import StaticDraftSteps
from .modeling import Eagle3DraftModel


def _draft_step(model: Eagle3DraftModel, target_features: bool, input_ids, hidden, position_ids, mask, cache,
                output_rows):
    """Pre-norm outputs ``[B, H]`` and draft log-probs ``[B, draft_vocab]`` (float32) of one step (of the
    ``output_rows`` alone when given)."""
    out = model(
        input_ids, hidden, target_features=target_features, position_ids=position_ids, attention_mask=mask,
        past_key_values=cache, compute_logits=False,
    )
    prenorm = out.prenorm_hidden_states[0]
    if output_rows is not None:
        prenorm = prenorm.index_select(0, output_rows)
    return prenorm, torch.log_softmax(model.lm_head(model.norm(prenorm)).float(), dim=-1)


def static_draft_steps(model: Eagle3DraftModel, max_length: int, compile_options: dict | None) -> StaticDraftSteps:
    """EAGLE-3 steps in a fixed-size cache: kind ``True`` reads target features, ``False`` its own outputs."""
    return StaticDraftSteps(_draft_step, model.config, model.device, model.dtype, max_length, compile_options)
