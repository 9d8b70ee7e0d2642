"""Adaptive Divergence-Aware Windowing (ADAW): which prefixes PPOW samples windows at.

Token criticality ``s_t = (1 − H(p_t)/log|V|) · KL(p_t ‖ q_t)`` weights the target–draft
divergence by the target's confidence; a window's priority is the sum of ``s`` over its ``W``
positions. A share of each batch's prefixes (the hard-window curriculum) is the highest-priority
windows; the rest are drawn uniformly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ...core.draws import draw_device


def criticality_scores(target_logits: torch.Tensor, draft_logits: torch.Tensor) -> torch.Tensor:
    """``[..., V] x [..., V] → [...]`` confidence-weighted ``KL(p ‖ q)``, both over the draft vocabulary.

    ``p`` is the target's next-token distribution restricted to the draft vocabulary (the only
    tokens the drafter can propose) and ``q`` the drafter's; ``|V|`` is the draft vocabulary size.
    """
    log_p = torch.log_softmax(target_logits.float(), dim=-1)
    log_q = torch.log_softmax(draft_logits.float(), dim=-1)
    p = log_p.exp()
    divergence = (p * (log_p - log_q)).sum(-1)
    entropy = -(p * log_p).sum(-1)
    confidence = 1.0 - entropy / math.log(target_logits.shape[-1])
    return confidence * divergence


def window_priorities(scores: torch.Tensor, window_size: int) -> torch.Tensor:
    """``[B, S] → [B, S]``: entry ``t`` is ``sum(scores[:, t : t + window_size])``."""
    padded = torch.nn.functional.pad(scores.float(), (1, window_size))
    totals = padded.cumsum(dim=-1)
    length = scores.shape[-1]
    return totals[:, window_size : window_size + length] - totals[:, :length]


def hard_window_fraction(progress: float, schedule: Sequence[float]) -> float:
    """The curriculum's share of hard windows at ``progress`` in [0, 1]: equal phases of ``schedule``."""
    phase = min(int(progress * len(schedule)), len(schedule) - 1)
    return float(schedule[phase])


def select_prefixes(
    priorities: torch.Tensor,
    valid: torch.Tensor,
    num_prefixes: int,
    hard_fraction: float,
    generator: torch.Generator | None = None,
) -> torch.LongTensor:
    """``[B, num_prefixes]`` prefix positions per row of ``valid`` (``[B, S]`` bool).

    ``round(hard_fraction * num_prefixes)`` are the valid positions of highest priority; the rest
    are drawn uniformly, without repeats, from the other valid positions. A row with fewer valid
    positions than asked repeats them.
    """
    chosen, device = [], draw_device(generator)  # the generator's device; torch's default one without it
    for row_priority, row_valid in zip(priorities, valid):
        candidates = row_valid.nonzero().flatten()
        if candidates.numel() == 0:
            raise ValueError("A conversation has no position where a whole window fits; drop it or lower window_size.")
        num_hard = min(round(hard_fraction * num_prefixes), candidates.numel())
        order = row_priority[candidates].argsort(descending=True)
        hard, rest = candidates[order[:num_hard]], candidates[order[num_hard:]]
        needed = num_prefixes - num_hard
        if rest.numel() >= needed:
            easy = rest[torch.randperm(rest.numel(), generator=generator, device=device)[:needed].to(rest.device)]
        else:
            pool = torch.cat([hard, rest])
            easy = pool[torch.randint(pool.numel(), (needed,), generator=generator, device=device).to(pool.device)]
        chosen.append(torch.cat([hard, easy]))
    return torch.stack(chosen)
