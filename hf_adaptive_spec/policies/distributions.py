"""Action distributions of learned policies, shared with their trainers."""

from __future__ import annotations

import torch
from torch.distributions import Categorical


def masked_categorical(logits: torch.Tensor, action_masks: torch.Tensor | None = None) -> Categorical:
    """A categorical distribution over ``logits`` ``[..., A]`` with disallowed actions (False in ``action_masks``)
    removed."""
    if action_masks is not None:
        logits = logits.masked_fill(~action_masks, torch.finfo(logits.dtype).min)
    return Categorical(logits=logits)
