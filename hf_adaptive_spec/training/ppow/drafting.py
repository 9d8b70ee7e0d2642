"""The drafter as a policy over speculative windows: sample, or re-score, ``G`` windows of ``W``
tokens at chosen prefixes of a conversation, exactly as the EAGLE-3 drafter drafts chains.

Draft position ``t`` (the drafter's step 0, which reads the target feature of token ``t`` and
the embedding of token ``t + 1``) proposes the window's first token; node ``k`` of a window sits
at RoPE position ``t + k``, sees the step-0 keys of positions ``<= t`` and its own ancestors
(the training-time test's layout, with a chain per sampled window).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ...core.draws import multinomial_on_generator_device
from ...drafters.eagle3.modeling import Eagle3DraftModel, Eagle3DraftOutput


@dataclass
class DraftedWindows:
    """``G`` windows at each of ``P`` prefixes of ``B`` conversations.

    Args:
        tokens: ``[B, P, G, W]`` draft-vocabulary ids.
        logits: ``[B, P, G, W, draft_vocab]`` the drafter's logits for each window token.
    """

    tokens: torch.LongTensor
    logits: torch.Tensor

    def log_distributions(self, temperature: float = 1.0) -> torch.Tensor:
        """``[B, P, G, W, draft_vocab]`` the drafter policy's log-distribution at each window token."""
        return torch.log_softmax(self.logits.float() / temperature, dim=-1)

    def log_probs(self, temperature: float = 1.0, log_distributions: torch.Tensor | None = None) -> torch.Tensor:
        """``[B, P, G, W]`` log-probability of each drafted token under the drafter (from
        ``log_distributions`` when already computed)."""
        log_q = self.log_distributions(temperature) if log_distributions is None else log_distributions
        return log_q.gather(-1, self.tokens[..., None]).squeeze(-1)


def first_draft_step(
    model: Eagle3DraftModel, input_ids: torch.LongTensor, features: torch.Tensor, cache: DynamicCache
) -> Eagle3DraftOutput:
    """Step 0 at every position ``t < S − 1`` (teacher-forced, causal), filling ``cache``."""
    length = input_ids.shape[1] - 1
    positions = torch.arange(length, device=input_ids.device)[None].expand(input_ids.shape[0], -1)
    return model(
        input_ids=input_ids[:, 1:], hidden_states=features[:, :length], target_features=True,
        position_ids=positions, past_key_values=cache,
    )


def draft_windows(
    model: Eagle3DraftModel,
    first: Eagle3DraftOutput,
    cache: DynamicCache,
    prefixes: torch.LongTensor,
    group_size: int,
    window_size: int,
    d2t: torch.LongTensor,
    tokens: torch.LongTensor | None = None,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> DraftedWindows:
    """Sample ``group_size`` windows at each prefix (or re-score the given ``tokens``).

    Args:
        first: :func:`first_draft_step`'s output, whose keys are in ``cache``.
        prefixes: ``[B, P]`` draft positions ``t`` (the window continues token ``t + 1``).
        d2t: ``[draft_vocab]`` offsets from draft to target ids (the unwrapped model's ``d2t``).
        tokens: ``[B, P, G, W]`` windows to re-score instead of sampling (the PPO update).
        temperature: sampling temperature of the drafter policy; 0 drafts greedily (its argmax).
        generator: draws the sampled tokens (on its own device, which may differ from the model's); None: torch's.
    """
    batch, num_prefixes = prefixes.shape
    nodes = num_prefixes * group_size
    batch_index = torch.arange(batch, device=prefixes.device)[:, None]
    node_prefix = prefixes.repeat_interleave(group_size, dim=1)  # [B, N]
    logits = first.logits[batch_index, node_prefix]  # [B, N, V]
    hidden = first.prenorm_hidden_states[batch_index, node_prefix]
    context = first.logits.shape[1]
    context_visible = torch.arange(context, device=prefixes.device)[None, None] <= node_prefix[..., None]
    own_node = torch.eye(nodes, dtype=torch.bool, device=prefixes.device)[None].expand(batch, -1, -1)
    given = None if tokens is None else tokens.reshape(batch, nodes, window_size)
    step_logits, step_tokens = [], []
    for k in range(window_size):
        step_logits.append(logits)
        if given is not None:
            token = given[..., k]
        elif temperature == 0:
            token = logits.argmax(dim=-1)
        else:
            probs = torch.softmax(logits.float() / temperature, dim=-1).reshape(-1, logits.shape[-1])
            # drawn on the generator's device (a CPU generator seeds a drafter on a GPU), the tokens back on the model's
            token = multinomial_on_generator_device(probs, generator).view(batch, nodes)
        step_tokens.append(token)
        if k == window_size - 1:
            break
        visible = torch.cat([context_visible, *[own_node] * (k + 1)], dim=-1)
        mask = torch.zeros(visible.shape, dtype=hidden.dtype, device=hidden.device)
        mask.masked_fill_(~visible, torch.finfo(hidden.dtype).min)
        out = model(
            input_ids=token + d2t[token], hidden_states=hidden, target_features=False,
            position_ids=node_prefix + k + 1, attention_mask=mask[:, None], past_key_values=cache,
        )
        logits, hidden = out.logits, out.prenorm_hidden_states
    shape = (batch, num_prefixes, group_size, window_size)
    return DraftedWindows(
        tokens=torch.stack(step_tokens, dim=-1).view(shape),
        logits=torch.stack(step_logits, dim=2).view(*shape, -1),
    )
