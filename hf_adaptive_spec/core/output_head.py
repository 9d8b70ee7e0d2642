"""The target's lm_head on one final-norm row at a time, as the acceptance walk needs it.

On CPU, MKL multiplies one row by an ``nn.Linear`` weight stored ``[vocab, hidden]`` at about
half the speed of the same product with the weight stored ``[hidden, vocab]``: 9.8 ms against
4.4 ms for SmolLM2's 49152 × 576 head in float32 on two AMD EPYC cores, in a forward that costs
about 64 ms. :class:`OutputHead` therefore keeps a contiguous transposed copy of a CPU float32
head's weight (one extra vocab × hidden matrix, 113 MB for SmolLM2; making it takes about
0.1 s) and reuses it across ``generate`` calls until the weight changes: its storage, its
in-place version counter, a row's sum (an edit through ``.data`` bumps no version; one that keeps
every row's float32 sum, values moved within a row, is seen only once marked with
``hfas.fast_path(model).weights_changed()``), or such a mark; a weight holding NaN is transposed
again each call. The logits differ from ``nn.Linear``'s in the last bits (about 1e-6), as the
multi-token verification forward's own hidden states already do. Other devices, dtypes and heads
(a bias is kept; hooks, adapters, quantized layers) run the module itself.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn

from .packaged import weights_version

# head -> (storage key, row sums, transposed weight)
_TRANSPOSED: weakref.WeakKeyDictionary[nn.Linear, tuple[tuple, torch.Tensor, torch.Tensor]] = (
    weakref.WeakKeyDictionary()
)


def _has_hooks(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks or hasattr(module, "_hf_hook"))


class OutputHead:
    """``head(hidden)`` for ``[n, hidden]`` rows, through a transposed weight where that is faster.

    Args:
        head: the model's output embeddings (``model.get_output_embeddings()``).
    """

    def __init__(self, head: nn.Module):
        self.head = head
        weight = getattr(head, "weight", None)
        self.uses_transposed_weight = (
            type(head) is nn.Linear
            and not _has_hooks(head)
            and weight.device.type == "cpu"
            and weight.dtype == torch.float32
        )
        self.weight_t = self._transposed() if self.uses_transposed_weight else None

    def _transposed(self) -> torch.Tensor:
        weight = self.head.weight.detach()
        # storage, in-place versions and writes marked by weights_changed() (a .data edit the row sums may miss)
        key = (weights_version(self.head), tuple(weight.shape))
        # every row's sum: an edit through .data bumps no version (a token's row set after resize_token_embeddings,
        # rows swapped), and stock generate reads the weight as it is; one read of it per call (~6 ms for SmolLM2's)
        row_sums = weight.sum(dim=1)
        cached = _TRANSPOSED.get(self.head)
        if cached is None or cached[0] != key or not torch.equal(cached[1], row_sums):
            cached = (key, row_sums, weight.t().contiguous())
            _TRANSPOSED[self.head] = cached
        return cached[2]

    @torch.no_grad()
    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.weight_t is None:
            return self.head(hidden)
        logits = hidden @ self.weight_t
        return logits if self.head.bias is None else logits + self.head.bias


class TopLogitsRescorer:
    """The argmax of the head's float32 products for a half-precision model's logits rows.

    A bfloat16 (float16) head returns its float32-accumulated dot products rounded to 8 (11)
    significant bits: near the top of a row, tokens whose products differ tie or swap, and greedy
    decoding then follows the rounding rather than the model (on Spec-Bench, SmolLM2 in bfloat16
    agreed with its float32 answers over 40% of their tokens before the first divergence with the
    rounded head, 64% with float32 products from the same bfloat16 hidden states). This recomputes
    in float32, from the row's final-norm hidden state, only the tokens whose rounded logit lies
    within two rounding steps of the row's maximum. Rounding is monotone, so the float32 argmax
    rounds to the maximum and is always among them (the second step covers kernels that round
    partial sums). The other tokens keep their rounded values.
    """

    def __init__(self, head: nn.Linear, dtype: torch.dtype):
        self.weight, self.bias = head.weight.detach(), head.bias
        self.margin = 2 * torch.finfo(dtype).eps  # relative: each rounded logit is off by at most eps / 2

    @staticmethod
    def applies(head: nn.Module | None, dtype: torch.dtype) -> bool:
        """Whether logits of ``dtype`` from ``head`` can be rescored: a plain linear head in half precision."""
        return type(head) is nn.Linear and not _has_hooks(head) and dtype in (torch.bfloat16, torch.float16)

    def _within_margin(self, scores: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
        """Which rounded ``scores`` lie within two rounding steps of their row's maximum ``top``: the tokens whose
        float32 product may be the largest."""
        return scores >= top - self.margin * top.abs().clamp(min=1.0)

    @torch.no_grad()
    def __call__(self, logits: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """``logits`` ``[vocab]`` (rounded) and the ``hidden`` ``[hidden]`` row they came from: float32 ``[vocab]``."""
        scores = logits.to(torch.float32, copy=True)
        top = scores.max()
        near = self._within_margin(scores, top).nonzero()[:, 0]
        if near.numel() > 1:
            exact = self.weight[near].float() @ hidden.float()
            scores[near] = exact if self.bias is None else exact + self.bias[near].float()
        return scores

    @torch.no_grad()
    def argmaxes(self, logits: torch.Tensor, hidden: torch.Tensor, candidates: int = 16) -> torch.Tensor:
        """The rescored argmax of every row at once, on the device: ``[2, n]``, each row's token and whether it is
        settled. For ``logits`` ``[n, vocab]`` (rounded) and their ``hidden`` ``[n, hidden]`` rows.

        No synchronisation: each row's ``candidates`` largest rounded logits stand for the tokens within the
        margin (a fixed shape, where :meth:`__call__` finds them with a ``nonzero``). A row whose last candidate is
        itself within the margin may have more: it is not settled, and its token is :meth:`__call__`'s to find.
        Ties go to the lowest token id, as ``argmax``'s. The products are summed in another order than one row's
        (a batched product, not a matrix-vector one), so two float32 products within a rounding step of each
        other may order differently than :meth:`__call__` orders them.
        """
        values, tokens = logits.topk(min(candidates, logits.shape[-1]), dim=-1)
        values = values.float()
        top = values[:, :1]
        near = self._within_margin(values, top)
        exact = torch.einsum("nkh,nh->nk", self.weight[tokens].float(), hidden.float())
        if self.bias is not None:
            exact = exact + self.bias[tokens].float()
        exact = exact.masked_fill(~near, float("-inf"))
        best = exact.max(dim=-1, keepdim=True).values
        choice = torch.where(exact == best, tokens, logits.shape[-1]).min(dim=-1).values
        return torch.stack([choice, (~near[:, -1]).long()])
