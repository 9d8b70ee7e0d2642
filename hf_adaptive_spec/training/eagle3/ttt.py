"""EAGLE-3's training-time test: unroll K draft steps, each fed the previous step's output.

Step ``k`` at position ``t`` plays the draft node of depth ``k + 1`` below root ``t + 1``: it
reads token ``x[t+1+k]`` and, for ``k > 0``, the previous step's pre-norm output at ``t``,
sits at RoPE position ``t + k``, attends to step 0's keys at positions ``<= t`` (the context)
and to steps ``1..k``'s keys at position ``t`` only (its ancestors), and predicts
``x[t+2+k]``. The loss is ``sum_k decay**k * soft_ce(target_k, draft_k)`` where ``target_k`` is
the target's next-token distribution restricted to the draft vocabulary.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint
from transformers import DynamicCache

from ...drafters.eagle3.modeling import Eagle3DraftModel

logger = logging.getLogger(__name__)

#: batch and position indices of a tensor's rows, as ``mask.nonzero(as_tuple=True)``
RowIndex = tuple[torch.Tensor, torch.Tensor]


@dataclass
class TTTBatch:
    """One training batch, right-padded, length ``S``.

    Args:
        input_ids: ``[B, S]`` tokens.
        features: ``[B, S, num_features * target_hidden]`` target features of each token.
        target_logits: ``[B, S, draft_vocab]`` target logits at each position (predicting the
            next token), restricted to the draft vocabulary.
        loss_mask: ``[B, S]`` 1 where the token is an assistant token worth predicting.
        loss_weight: ``[B, S]`` how much each token's loss counts (``None``: every token alike), e.g.
            more for the tokens a prompt lookup would have copied (``Eagle3Config.copy_loss_weight``).
    """

    input_ids: torch.LongTensor
    features: torch.Tensor
    target_logits: torch.Tensor
    loss_mask: torch.Tensor
    loss_weight: torch.Tensor | None = None


def shift_positions(x: torch.Tensor, offset: int, length: int, fill: float | int = 0) -> torch.Tensor:
    """``x[:, offset : offset + length]``, padded with ``fill`` past the end."""
    part = x[:, offset : offset + length]
    missing = length - part.shape[1]
    if missing > 0:
        pad = torch.full((x.shape[0], missing, *x.shape[2:]), fill, dtype=x.dtype, device=x.device)
        part = torch.cat([part, pad], dim=1)
    return part


def ttt_attention_mask(length: int, step: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``[1, 1, L, (step + 1) * L]`` additive mask: causal over step 0, diagonal over later steps."""
    allowed = [torch.ones(length, length, dtype=torch.bool, device=device).tril()]
    allowed += [torch.eye(length, dtype=torch.bool, device=device)] * step
    mask = torch.zeros(length, (step + 1) * length, dtype=dtype, device=device)
    return mask.masked_fill_(~torch.cat(allowed, dim=1), torch.finfo(dtype).min)[None, None]


@dataclass
class TTTStep:
    """One unrolled draft step: logits ``[B, L, draft_vocab]`` (``[rows, draft_vocab]`` at ``row_index`` when
    unrolled with ``loss_rows_only``), and aligned with the positions (``[B, L]``) the target's argmax over the
    draft vocabulary (``-1`` past the sequence) and the masks.

    ``mask`` (the loss's) holds the answer positions whose token the draft vocabulary can say;
    ``answer_mask`` holds every answer position, so that a measure of acceptance counts a token
    outside the draft vocabulary as the miss it is when drafting; ``loss_weight`` is ``mask`` times
    the batch's ``loss_weight`` (``mask`` itself when the batch has none); ``row_index`` (batch and position
    indices, ``mask.nonzero(as_tuple=True)``; None: every position) says where ``logits`` were computed.
    """

    logits: torch.Tensor
    target_argmax: torch.Tensor
    mask: torch.Tensor
    answer_mask: torch.Tensor
    loss_weight: torch.Tensor
    row_index: RowIndex | None = None

    def draft_argmax(self) -> torch.Tensor:
        """``[B, L]`` the drafter's argmax at each position, ``-1`` where no logits were computed."""
        if self.row_index is None:
            return self.logits.argmax(-1)
        argmax = torch.full(self.mask.shape, -1, dtype=torch.long, device=self.mask.device)
        argmax[self.row_index] = self.logits.argmax(-1)
        return argmax


@dataclass
class StepMasks:
    """One unrolled step's masks over the draft positions ``[B, L]``: ``answer`` (every answer position), ``mask``
    (those whose token the draft vocabulary can say: the loss's) and ``loss_weight`` (``mask`` times the batch's
    ``loss_weight``; ``mask`` itself when the batch has none). See :class:`TTTStep`."""

    answer: torch.Tensor
    mask: torch.Tensor
    loss_weight: torch.Tensor


def step_masks(
    input_ids: torch.LongTensor,
    loss_mask: torch.Tensor,
    t2d: torch.Tensor,
    steps: int,
    loss_weight: torch.Tensor | None = None,
) -> list[StepMasks]:
    """Each of ``steps`` unrolled steps' masks: step ``k`` at position ``t`` predicts ``x[t+2+k]``, so it reads the
    masks ``2 + k`` positions on; ``t2d``: the draft vocabulary's mask over the target's tokens."""
    length = input_ids.shape[1] - 1  # draft position t needs token t + 1
    in_draft_vocab = t2d[input_ids]
    masks = []
    for step in range(steps):
        answer = shift_positions(loss_mask, 2 + step, length).float()
        mask = answer * shift_positions(in_draft_vocab, 2 + step, length)
        weight = mask if loss_weight is None else mask * shift_positions(loss_weight, 2 + step, length)
        masks.append(StepMasks(answer, mask, weight))
    return masks


def step_loss_weight_totals(
    input_ids: torch.LongTensor,
    loss_mask: torch.Tensor,
    t2d: torch.Tensor,
    steps: int,
    loss_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[steps]`` each step's loss weight summed over the batch (:func:`step_masks`): what :func:`ttt_loss` divides
    that step's summed loss by, computed without a forward pass (from the masks alone)."""
    return torch.stack([masks.loss_weight.sum() for masks in step_masks(input_ids, loss_mask, t2d, steps, loss_weight)])


def ttt_unroll(
    model: Eagle3DraftModel, batch: TTTBatch, steps: int, t2d: torch.Tensor | None = None, loss_rows_only: bool = False
) -> list[TTTStep]:
    """Run the ``steps`` draft steps of the training-time test over every position at once.

    ``model`` may be wrapped (DDP); ``t2d`` is then the unwrapped model's draft-vocabulary mask.
    ``loss_rows_only`` computes each step's logits only where its ``mask`` holds (the positions a loss or
    an acceptance count reads: not the prompt, not the padding).
    """
    input_ids, features = batch.input_ids, batch.features
    length = input_ids.shape[1] - 1  # draft position t needs token t + 1
    positions = torch.arange(length, device=input_ids.device)[None].expand(input_ids.shape[0], -1)
    target_argmax = batch.target_logits.argmax(-1)  # once: every step reads it shifted
    cache = DynamicCache()
    hidden, from_target = features[:, :length], True
    unrolled = []
    masks = step_masks(input_ids, batch.loss_mask, model.t2d if t2d is None else t2d, steps, batch.loss_weight)
    # every step's rows before any forward is queued: on an accelerator each nonzero waits for the device, and a
    # wait between two steps' forwards would leave it idle while the host queues the next one
    row_indices = [step_mask.mask.nonzero(as_tuple=True) if loss_rows_only else None for step_mask in masks]
    for step, (step_mask, row_index) in enumerate(zip(masks, row_indices)):
        out = model(
            input_ids=shift_positions(input_ids, 1 + step, length),
            hidden_states=hidden,
            target_features=from_target,
            position_ids=positions + step,
            attention_mask=ttt_attention_mask(length, step, hidden.dtype, hidden.device),
            past_key_values=cache,
            logits_index=row_index,
        )
        argmax = shift_positions(target_argmax, 1 + step, length, fill=-1)
        unrolled.append(
            TTTStep(out.logits, argmax, step_mask.mask, step_mask.answer, step_mask.loss_weight, row_index)
        )
        hidden, from_target = out.prenorm_hidden_states, False
    return unrolled


def soft_cross_entropy_sum(
    logits: torch.Tensor, target_probs: torch.Tensor, weight: torch.Tensor, target_rows: RowIndex | None = None
) -> torch.Tensor:
    """``sum(weight * -sum_v target_probs * log_softmax(logits))``, computed in float32.

    With ``target_rows`` (batch and position indices), ``logits`` and ``weight`` hold those rows only and
    ``target_probs`` every position: the target's rows are gathered here, so that a recomputed or compiled loss
    keeps the indices for backward, not a copy of the rows.
    """
    if target_rows is not None:
        target_probs = target_probs[target_rows]
    log_q = torch.log_softmax(logits.float(), dim=-1)
    return (-(target_probs * log_q).sum(-1) * weight).sum()


def recomputed_soft_cross_entropy_sum(
    logits: torch.Tensor, target_probs: torch.Tensor, weight: torch.Tensor, target_rows: RowIndex | None = None
) -> torch.Tensor:
    """:func:`soft_cross_entropy_sum` with its log-softmax recomputed in backward (activation checkpointing)."""
    if not logits.requires_grad:
        return soft_cross_entropy_sum(logits, target_probs, weight, target_rows)
    return checkpoint(soft_cross_entropy_sum, logits, target_probs, weight, target_rows, use_reentrant=False)


class CompiledCrossEntropy:
    """:func:`recomputed_soft_cross_entropy_sum` compiled by inductor, with dynamic shapes (batch lengths and row
    counts share a compilation; sizes 0 and 1 get their own, as dynamo specialises them).

    The gather, cast, log-softmax, product and sums run fused, and the checkpoint inside the compiled region
    keeps what ``recompute_softmax`` keeps (compiled without it, the partitioner keeps each step's gathered
    target rows in float32 instead of gathering them again). Compiled on first use. Where the first call's
    compilation raises (no C++ compiler on a CPU, no Triton on a GPU), it says why once, as a warning, and runs
    the loss uncompiled with the log-softmax recomputed, so a run sized for the compiled loss's memory keeps
    training. Running out of memory is raised, not taken for a failure to compile; a failure while compiling
    the backward pass surfaces in ``backward()``.
    """

    def __init__(self):
        self.compiled = torch.compile(recomputed_soft_cross_entropy_sum, dynamic=True)
        self.failure: str | None = None

    def __call__(
        self,
        logits: torch.Tensor,
        target_probs: torch.Tensor,
        weight: torch.Tensor,
        target_rows: RowIndex | None = None,
    ) -> torch.Tensor:
        """:func:`soft_cross_entropy_sum`, compiled where inductor can."""
        if self.failure is None:
            try:
                return self.compiled(logits, target_probs, weight, target_rows)
            except torch.OutOfMemoryError:
                raise
            except Exception as error:  # dynamo's and inductor's failures share no base class
                self.failure = f"{type(error).__name__}: {error}"
                logger.warning("compile_loss: torch.compile could not compile the loss here (%s); it runs uncompiled, "
                               "with the log-softmax recomputed in backward (recompute_loss_softmax).", self.failure)
        return recomputed_soft_cross_entropy_sum(logits, target_probs, weight, target_rows)


@functools.cache
def compiled_soft_cross_entropy_sum() -> CompiledCrossEntropy:
    """The process's one :class:`CompiledCrossEntropy` (its compilations are reused by every later batch)."""
    return CompiledCrossEntropy()


def step_cross_entropy(
    step: TTTStep, shift: int, target_probs: torch.Tensor, recompute: bool, compiled: bool
) -> torch.Tensor:
    """``step``'s :func:`soft_cross_entropy_sum` at its rows against the target's rows ``shift`` positions on:
    compiled, recomputed in backward, or plain."""
    row, position = step.row_index
    if compiled:
        loss = compiled_soft_cross_entropy_sum()
    else:
        loss = recomputed_soft_cross_entropy_sum if recompute else soft_cross_entropy_sum
    return loss(step.logits, target_probs, step.loss_weight[row, position], (row, position + shift))


def check_target_temperature(value: float) -> None:
    """Refuse a temperature of the loss's target distribution that is not a finite number above 0."""
    if not 0 < value < math.inf:
        raise ValueError(
            f"target_temperature must be a finite number above 0 (1: the target's own distribution), got {value}."
        )


def ttt_loss(
    model: Eagle3DraftModel,
    batch: TTTBatch,
    steps: int = 7,
    decay: float = 0.8,
    t2d: torch.Tensor | None = None,
    recompute_softmax: bool = False,
    compile_loss: bool = False,
    target_temperature: float = 1.0,
    step_normalisers: torch.Tensor | None = None,
) -> tuple[torch.Tensor, list[float], list[float]]:
    """Training-time-test loss; returns ``(loss, per-step loss, per-step top-1 accuracy)``.

    Each step's loss is the soft cross-entropy against the target distribution over the draft
    vocabulary, summed over masked positions (weighted by the batch's ``loss_weight`` when it has
    one) and divided by ``step_normalisers[step]``; without ``step_normalisers``, by the step's own loss weight
    total (:func:`step_loss_weight_totals`): the batch's mean. Given the totals of the micro-batches a gradient
    accumulates (:meth:`Eagle3Trainer.get_batch_samples`), the micro-batches' losses add up to the mean over all of
    them. The per-step losses returned are this batch's own means whatever the normalisers. Accuracy is the share of
    masked positions where the draft argmax equals the target's argmax, every position counting once.
    ``target_temperature`` below 1 sharpens the target distribution the loss reads (``softmax(logits / T)``: the
    same argmax, more of the mass on it), toward what greedy verification accepts, the target's top token.

    The target's float32 distribution is computed once per batch. Each step computes its logits only at
    the positions its loss reads (answer tokens the draft vocabulary holds: not the prompt, not the
    padding; ``loss_rows_only``), and its cross-entropy gathers the target's rows for them, shifted by
    the step.

    ``recompute_softmax`` recomputes each step's float32 log-softmax in the backward pass instead of
    keeping it (activation checkpointing): per step autograd then keeps the logits in their own
    dtype (2 bytes an element of ``[rows, draft vocabulary]`` in bfloat16) and the rows' indices instead
    of float32 tensors (4 + 4). Worth it on a GPU in bfloat16, where it bounds the batch once the draft
    vocabulary is large; in float32 it saves the gathered rows and costs the recomputation. ``compile_loss``
    compiles each step's cross-entropy (:func:`compiled_soft_cross_entropy_sum`): it keeps what
    ``recompute_softmax`` keeps, so with it that flag changes nothing.
    """
    check_target_temperature(target_temperature)
    total = batch.features.new_zeros((), dtype=torch.float32)
    target_probs = torch.softmax(batch.target_logits.float() / target_temperature, dim=-1)
    step_losses, step_accuracy = [], []
    for step, unrolled in enumerate(ttt_unroll(model, batch, steps, t2d, loss_rows_only=True)):
        # position t drafts token t + 2 + step, which the target's distribution at t + 1 + step predicts
        summed = step_cross_entropy(unrolled, 1 + step, target_probs, recompute_softmax, compile_loss)
        own_weight = unrolled.loss_weight.sum()
        normaliser = own_weight if step_normalisers is None else step_normalisers[step]
        total = total + decay**step * (summed / normaliser.clamp(min=1e-6))
        hits = (unrolled.draft_argmax() == unrolled.target_argmax).float()
        step_losses.append(summed.detach().float() / own_weight.clamp(min=1e-6))
        step_accuracy.append((hits * unrolled.mask).sum() / unrolled.mask.sum().clamp(min=1.0))
    losses, accuracy = torch.stack([torch.stack(step_losses), torch.stack(step_accuracy)]).tolist()  # one host sync
    return total, losses, accuracy
