"""The frozen target's side of PPOW: conversation features, and the verification of drafted windows.

One target forward over the conversations gives the drafter's features, the target's
distributions along the data (for ADAW and the greedy reference window) and a KV cache; a second
forward over only the drafted windows, on that cache with a 4D mask (each window a chain rooted
at its prefix), gives the target's distribution at every window token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

from ...core.attention import check_tree_attention_support
from ...core.draws import draw_device
from ...core.features import FeatureCapture
from ...core.kv_cache import drop_tail
from ..eagle3.features import TargetFeatures


@dataclass
class ConversationPass:
    """The target's forward over a batch of conversations ``[B, S]``.

    Args:
        features: ``[B, S, num_features * H]`` the drafter's target features.
        final_hidden: ``[B, S, H]`` final-norm outputs (``lm_head`` of position ``u`` predicts ``u + 1``).
        cache: the target's KV cache over the ``S`` positions.
    """

    features: torch.Tensor
    final_hidden: torch.Tensor
    cache: DynamicCache


@dataclass
class WindowVerdicts:
    """The target's view of ``[B, P, G, W]`` drafted windows.

    Args:
        token_log_probs: target log-probability of each drafted token (full vocabulary).
        greedy_match: whether each drafted token is the target's argmax.
        draft_vocab_logits: ``[B, P, G, W, draft_vocab]`` the target's logits restricted to the
            draft vocabulary (the anchor of PPOW's KL term).
    """

    token_log_probs: torch.Tensor
    greedy_match: torch.Tensor
    draft_vocab_logits: torch.Tensor


class WindowVerifier(TargetFeatures):
    """The frozen target, run the two ways PPOW needs (and, as :class:`TargetFeatures`, EAGLE-3's way).

    Args:
        target: the target causal LM (frozen, eval mode, a 4D-mask attention kernel).
        layer_ids: the drafter's feature layers (``hidden_states`` numbering).
        draft_to_target: ``[draft_vocab]`` target ids of the draft vocabulary.
    """

    def __init__(self, target: PreTrainedModel, layer_ids: list[int], draft_to_target: torch.LongTensor):
        check_tree_attention_support(target.config, role="target")
        super().__init__(target, layer_ids, draft_to_target)
        self.lm_head = target.get_output_embeddings()
        self.draft_to_target = draft_to_target

    def conversations(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> ConversationPass:
        """Run the target over right-padded conversations, keeping its KV cache."""
        cache = DynamicCache()
        features, final_hidden = self.run(input_ids, attention_mask, cache)
        return ConversationPass(features, final_hidden, cache)

    @torch.no_grad()
    def greedy_log_likelihood(
        self, passed: ConversationPass, prefixes: torch.LongTensor, window_size: int
    ) -> torch.Tensor:
        """``[B, P]`` cumulative log-probability of the target's greedy choice along each data window
        (positions ``t + 1 .. t + W``): the likelihood of the target's own greedy window when the
        data is the target's greedy output (regenerated answers), an estimate otherwise."""
        offsets = torch.arange(1, window_size + 1, device=prefixes.device)
        positions = prefixes[..., None] + offsets  # [B, P, W]
        batch_index = torch.arange(prefixes.shape[0], device=prefixes.device)[:, None, None]
        logits = self.lm_head(passed.final_hidden[batch_index, positions]).float()
        best = logits.max(dim=-1).values - torch.logsumexp(logits, dim=-1)
        return best.sum(dim=-1)

    @torch.no_grad()
    def verify(
        self, passed: ConversationPass, prefixes: torch.LongTensor, target_tokens: torch.LongTensor
    ) -> WindowVerdicts:
        """Score ``[B, P, G, W]`` windows (target ids) drafted after token ``t + 1`` of each prefix ``t``.

        The first token's distribution is the conversation's at ``t + 1``; the window's first
        ``W − 1`` tokens run through the target as chains on ``passed.cache`` (cropped back after).
        """
        batch, num_prefixes, group_size, window_size = target_tokens.shape
        device = target_tokens.device
        context = passed.final_hidden.shape[1]
        batch_index = torch.arange(batch, device=device)[:, None]
        first_hidden = passed.final_hidden[batch_index, prefixes + 1]  # [B, P, H]
        first_hidden = first_hidden[:, :, None, None].expand(-1, -1, group_size, 1, -1)
        hidden = first_hidden
        if window_size > 1:
            fed = target_tokens[..., :-1].reshape(batch, -1)  # nodes in (p, g, j) order
            depth = torch.arange(window_size - 1, device=device)
            node_prefix = prefixes[:, :, None, None].expand(-1, -1, group_size, window_size - 1).reshape(batch, -1)
            node_chain = torch.arange(num_prefixes * group_size, device=device).repeat_interleave(window_size - 1)
            node_depth = depth.repeat(num_prefixes * group_size)
            context_visible = torch.arange(context, device=device)[None, None] <= (node_prefix + 1)[..., None]
            chain_visible = (node_chain[:, None] == node_chain[None]) & (node_depth[None] <= node_depth[:, None])
            visible = torch.cat([context_visible, chain_visible[None].expand(batch, -1, -1)], dim=-1)
            dtype = passed.final_hidden.dtype
            mask = torch.zeros(visible.shape, dtype=dtype, device=device).masked_fill_(~visible, torch.finfo(dtype).min)
            with FeatureCapture(self.target, [self.final_index]) as capture:
                self.target.get_decoder()(
                    input_ids=fed, position_ids=node_prefix + 2 + node_depth[None], attention_mask=mask[:, None],
                    past_key_values=passed.cache, use_cache=True,
                )
            drop_tail(passed.cache, fed.shape[1])
            nodes = capture.latest[self.final_index].view(batch, num_prefixes, group_size, window_size - 1, -1)
            hidden = torch.cat([first_hidden, nodes], dim=3)
        logits = self.lm_head(hidden).float()
        token_logits = logits.gather(-1, target_tokens[..., None]).squeeze(-1)
        return WindowVerdicts(
            token_log_probs=token_logits - torch.logsumexp(logits, dim=-1),
            greedy_match=logits.argmax(dim=-1) == target_tokens,
            draft_vocab_logits=logits[..., self.draft_to_target],
        )


def accepted_prefix_lengths(
    verdicts: WindowVerdicts, draft_log_probs: torch.Tensor, rule: str, generator: torch.Generator | None = None
) -> torch.LongTensor:
    """``[..., W] → [...]`` tokens accepted before the first rejection.

    ``rule="sampling"``: speculative sampling's test, token ``j`` is accepted with probability
    ``min(1, p_j / q_j)``; ``rule="greedy"``: accepted when it is the target's argmax.
    """
    if rule == "greedy":
        accepted = verdicts.greedy_match
    elif rule == "sampling":
        device = draw_device(generator, draft_log_probs)  # a CPU generator, GPU rows too
        uniform = torch.rand(draft_log_probs.shape, generator=generator, device=device).to(draft_log_probs.device)
        accepted = torch.log(uniform) < verdicts.token_log_probs - draft_log_probs
    else:
        raise ValueError(f"Unknown acceptance rule {rule!r}: use 'sampling' or 'greedy'.")
    return accepted.long().cumprod(dim=-1).sum(dim=-1)
