"""Target-side inputs of EAGLE-3 training: fused features and draft-vocabulary logits."""

from __future__ import annotations

import torch
from transformers import Cache, PreTrainedModel

from ...core.features import FeatureCapture, decoder_layers
from ...generation.targets import lm_head_is_last_step
from .feature_cache import FeatureCache, read_through


class TargetFeatures:
    """Runs the frozen target once per batch and returns what the drafter learns from.

    The target's distribution is read as its head's output on the final-norm hidden states, over the draft vocabulary
    rows only (the head's bias included); a target whose logits are something else (Gemma-2's
    ``final_logit_softcapping``, Granite's ``logits_scaling``) is refused: the drafter would learn another
    distribution than the target's.

    Args:
        target: the target causal LM (frozen, eval mode).
        layer_ids: the drafter's feature layers (``hidden_states`` numbering).
        draft_to_target: ``[draft_vocab]`` target ids of the draft vocabulary.

    Attributes:
        cache: a :class:`FeatureCache` the training batches read each conversation's outputs from when it holds them
            (and store them in when it does not); None runs the target on every batch.
    """

    cache: FeatureCache | None = None

    def __init__(self, target: PreTrainedModel, layer_ids: list[int], draft_to_target: torch.LongTensor):
        self.target = target.eval().requires_grad_(False)
        self.layer_ids = list(layer_ids)
        self.final_index = len(decoder_layers(target))
        check_plain_head(target, self.final_index)
        head = target.get_output_embeddings()
        self.draft_to_target = draft_to_target
        self.head = head.weight[draft_to_target].detach()
        bias = getattr(head, "bias", None)
        self.bias = None if bias is None else bias[draft_to_target].detach()

    @torch.no_grad()
    def run(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor, cache: Cache | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(features [B, S, len(layer_ids) * H], final-norm hidden states [B, S, H])``, filling ``cache`` if given."""
        with FeatureCapture(self.target, [*self.layer_ids, self.final_index]) as capture:
            self.target.get_decoder()(
                input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=cache is not None
            )
        return torch.cat([capture.latest[i] for i in self.layer_ids], dim=-1), capture.latest[self.final_index]

    def draft_vocab_logits(self, final_hidden: torch.Tensor) -> torch.Tensor:
        """Target logits over the draft vocabulary only, from final-norm hidden states."""
        return torch.nn.functional.linear(final_hidden, self.head, self.bias)

    def __call__(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor, cached: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(features [B, S, len(layer_ids) * H], target_logits [B, S, draft_vocab])``; ``cached=False`` runs the
        target even with a :attr:`cache`, and stores nothing in it."""
        if self.cache is None or not cached:
            features, final_hidden = self.run(input_ids, attention_mask)
        else:
            features, final_hidden = read_through(self.cache, self.run, input_ids, attention_mask)
        return features, self.draft_vocab_logits(final_hidden)


@torch.no_grad()
def check_plain_head(target: PreTrainedModel, final_index: int) -> None:
    """Refuse a target whose logits are not its head's output on the final-norm hidden states (softcapped, scaled),
    checked on a forward of a few distinct tokens (one may be the padding token, whose embedding may be 0) as decoding
    checks it on the prefill (:func:`~hf_adaptive_spec.generation.targets.lm_head_is_last_step`)."""
    tokens = torch.arange(min(8, target.get_output_embeddings().weight.shape[0]), device=target.device)[None]
    with FeatureCapture(target, [final_index]) as capture:
        logits = target(input_ids=tokens).logits
    if not lm_head_is_last_step(target, capture.latest[final_index][0, -1], logits[0, -1]):
        raise ValueError(
            f"The target's logits are not its lm_head's output on the final-norm hidden states (a "
            f"{type(target).__name__}: softcapping or scaling, as Gemma-2's final_logit_softcapping or Granite's "
            "logits_scaling): EAGLE-3 training reads the target's distribution from those hidden states, so the "
            "drafter would learn another distribution than the target's. Train against a target whose logits are "
            "its head's output."
        )
