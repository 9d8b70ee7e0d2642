"""The held-out learning curve of an EAGLE-3 drafter, measured while it trains.

For conversations the target answered itself, the training-time test with the data's tokens fed
in *is* greedy chain drafting: while every draft so far equalled the target's argmax, the next
draft step reads exactly the tokens a real chain would. So per position ``t`` the unrolled steps
give whether a chain rooted there accepts 1, 2, ... tokens, and from that

- **first-draft acceptance**: the share of answer positions whose first draft is the target's
  argmax (a token outside the draft vocabulary is a miss, as it is when drafting);
- **chain τ(d)**: ``1 + E[accepted tokens]`` of a greedy chain of depth ``d`` (tokens per target
  forward), averaged over every answer position;
- **decoding τ(d)**: the same chains walked as decoding walks them: the first cycle of each answer
  starts after the prefill's token, each next one where the last stopped (its accepted tokens and the
  target's own). Decoding meets the positions after a miss, which are harder than the average, so
  this is the τ a chain of depth ``d`` gets in ``generate`` on these answers; chain τ overstates it;
- **draft-vocabulary coverage**, and the first-draft acceptance on the positions whose token the
  draft vocabulary holds (the training loss's positions). Curves written before 2026-11-27 hold
  only this in-vocabulary acceptance, and ``read_curve`` reads their points that way;
- **copying**: the share of answer tokens a prompt lookup would have proposed (:func:`lookup_hits`,
  n-grams up to 2, the one-token match included) and the acceptance at each draft depth on those tokens
  alone: where the lookup branch would have been right, how much of it the drafter already covers.

The target's features are computed once, when the set is built; each evaluation runs only the
drafter. The points, the curve file and the callback that measures them while training: :mod:`.curve`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ...core.sequences import end_of_sequence_ids
from ...core.settings import DEFAULT_MAX_NGRAM_SIZE
from ...drafters.eagle3.modeling import Eagle3DraftModel
from ...generation.prompt_lookup import lookup_hits
from .curve import HeldOutPoint, drafter_shape
from .data import collate, load_samples
from .features import TargetFeatures
from .lineage import prompt_digest, prompt_digests
from .ttt import TTTBatch, TTTStep, shift_positions, ttt_unroll

logger = logging.getLogger(__name__)


def without_training_prompts(
    held_out: list[dict[str, list[int]]], training: Iterable[dict[str, list[int]]],
    trained_before: AbstractSet[str] = frozenset(),
) -> tuple[list[dict[str, list[int]]], int]:
    """The held-out conversations that open with a prompt no training conversation opens with, nor one of the
    stages before (``trained_before``: their :func:`~.lineage.prompt_digest` digests), and how many were left out.
    The same prompt in both is not held out: a target answering greedily gives it the same answer (in the shipped
    data 4 of the first 64 held-out conversations had their first answer in the training data, and 2 more their
    prompt), and a sampled answer still trained the drafter on the target's distribution after that prompt."""
    trained = prompt_digests(training) | trained_before
    kept = [sample for sample in held_out if prompt_digest(sample) not in trained]
    return kept, len(held_out) - len(kept)


def chain_accepted(hits: list[torch.Tensor], valid: torch.Tensor) -> torch.Tensor:
    """Tokens a greedy chain rooted at each valid position accepts: depth ``k + 1`` needs steps ``0..k`` all right."""
    return chain_lengths(hits, valid)[valid]


def chain_lengths(hits: list[torch.Tensor], valid: torch.Tensor) -> torch.Tensor:
    """:func:`chain_accepted` at every position, ``[B, L]`` (0 where ``valid`` is not set)."""
    alive, accepted = valid.clone(), torch.zeros(valid.shape, dtype=torch.long, device=valid.device)
    for hit in hits:
        alive &= hit
        accepted += alive
    return accepted


def decoding_walk(chains: torch.Tensor, valid: torch.Tensor, ended: torch.Tensor | None = None) -> list[int]:
    """The accepted tokens of each cycle when ``generate`` decodes every answer with these chains.

    ``chains`` is :func:`chain_lengths`'s ``[B, L]``: what a chain rooted at draft position ``t`` accepts
    (its first draft is token ``t + 2``); ``valid`` marks the answer positions, each answer a run of them;
    ``ended[b, t]`` says token ``t + 1`` is an end-of-sequence token, after which ``generate`` drafts no more.
    The answer's first token comes from the prefill, so its first cycle is rooted at its second position;
    a cycle rooted at ``t`` commits its accepted tokens and the target's next one, so the next is rooted at
    ``t + accepted + 1``; the last cycle accepts no token past the answer's last (``generate``'s length cap
    and its end-of-sequence stop).
    """
    cycles: list[int] = []
    ended_rows = ended.tolist() if ended is not None else [[False] * chains.shape[1]] * chains.shape[0]
    for row, mask, stops in zip(chains.tolist(), valid.tolist(), ended_rows):
        start = None
        for t, is_answer in enumerate([*mask, False]):
            if is_answer and start is None:
                start = t
            elif not is_answer and start is not None:
                end = next((u for u in range(start, t) if stops[u]), t)
                cycles += _walk(row, start + 1, end)
                start = None
    return cycles


def _walk(chains: list[int], root: int, end: int) -> list[int]:
    accepted = []
    while root < end:
        accepted.append(min(chains[root], end - root - 1))
        root += accepted[-1] + 1
    return accepted


class HeldOutSet:
    """Held-out samples with the frozen target's features, to evaluate a drafter on.

    Args:
        target: the target model.
        samples: tokenised conversations (``input_ids`` and the assistant ``loss_mask``) whose
            assistant tokens the target produced itself (greedy).
        draft: the drafter to be evaluated (its feature layers and draft vocabulary).
        depth: draft steps unrolled (the chain depth of ``chain_tau``).
    """

    def __init__(
        self, target: PreTrainedModel, samples: list[dict[str, list[int]]], draft: Eagle3DraftModel, depth: int = 3
    ):
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}.")
        if not samples:
            raise ValueError("A held-out set needs at least one conversation with an assistant turn.")
        self.depth = depth
        self.target_dtype = str(target.dtype).removeprefix("torch.")
        #: which conversations the set holds, as a point records it (a curve on another set starts a new point)
        self.digest = hashlib.sha256(
            json.dumps([[s["input_ids"], s["loss_mask"]] for s in samples]).encode()
        ).hexdigest()[:16]
        #: the opening prompts of the held-out conversations (:func:`~.lineage.prompt_digest`)
        self.prompts = prompt_digests(samples)
        self.feature_layers = list(draft.config.aux_hidden_state_layer_ids)
        self.draft_to_target = draft.draft_to_target().detach().cpu()
        features = TargetFeatures(target, self.feature_layers, self.draft_to_target)
        self.end_ids = torch.tensor(end_of_sequence_ids(target), dtype=torch.long)
        self.samples = []
        device = next(target.parameters()).device  # the script moves the target to the training device first
        for sample in samples:
            batch = collate([sample], pad_token_id=0)
            fused, final_hidden = features.run(batch["input_ids"].to(device), batch["attention_mask"].to(device))
            mask = self._answers_to_their_end(batch["input_ids"], batch["loss_mask"])
            # kept in host memory (the logits over the draft vocabulary are large): evaluate moves one at a time
            logits = features.draft_vocab_logits(final_hidden).cpu()
            self.samples.append((batch["input_ids"], fused.cpu(), logits, mask))

    def _answers_to_their_end(self, input_ids: torch.LongTensor, loss_mask: torch.Tensor) -> torch.Tensor:
        """``loss_mask`` without the tokens that follow an end-of-sequence token in the same answer (a chat
        template's newline after ``<|im_end|>``): ``generate`` stops at the marker and never drafts or emits them."""
        mask, ends = loss_mask.clone(), torch.isin(input_ids, self.end_ids)
        for row in range(mask.shape[0]):
            ended = False
            for t in range(mask.shape[1]):
                if not mask[row, t]:
                    ended = False  # the next answer starts afresh
                elif ended:
                    mask[row, t] = 0
                ended = ended or bool(mask[row, t] and ends[row, t])
        return mask

    @classmethod
    def from_jsonl(
        cls,
        target: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        path: str | Path,
        draft: Eagle3DraftModel,
        max_length: int = 512,
        limit: int | None = 64,
        depth: int = 3,
        training: Iterable[dict[str, list[int]]] | None = None,
        trained_before: AbstractSet[str] = frozenset(),
        length_name: str = "max_length",
    ) -> HeldOutSet:
        """The first ``limit`` conversations of a JSONL file of target-answered conversations; with ``training``
        (the tokenised training conversations) and ``trained_before`` (the prompt digests of the drafter's stages
        before, :func:`~.lineage.lineage_before`), without those that open with a prompt trained on
        (:func:`without_training_prompts`), which are counted in a warning. ``length_name``: the setting
        ``max_length`` comes from, named when no conversation holds an answer within it."""
        samples = load_samples(tokenizer, path, max_length, limit, length_name)
        if training is not None or trained_before:
            samples, dropped = without_training_prompts(samples, training or [], trained_before)
            if not samples:
                raise ValueError(
                    f"Every held-out conversation of {path} opens with a prompt the training data (this stage's or an "
                    "earlier stage's) opens with too: "
                    "hold out conversations the training data does not hold (regenerate_sharegpt.py's "
                    "--exclude_ids_from keeps a file's conversations out)."
                )
            if dropped:
                logger.warning(
                    "%d of the held-out conversations of %s open with a prompt the training data (this stage's or an "
                    "earlier stage's) opens with too "
                    "(a greedy target answers it alike): the curve measures the other %d.", dropped, path, len(samples)
                )
        return cls(target, samples, draft, depth)

    def check_drafter(self, draft: Eagle3DraftModel) -> None:
        """Refuse a drafter whose feature layers or draft vocabulary differ from the one the set was built for:
        its features and target logits would be another drafter's, and its hits silently wrong."""
        layers = list(draft.config.aux_hidden_state_layer_ids)
        if layers != self.feature_layers:
            raise ValueError(
                f"This held-out set holds the target's features of layers {self.feature_layers}, but the drafter reads "
                f"layers {layers}. Build a HeldOutSet for this drafter (HeldOutSet.from_jsonl(..., draft=it))."
            )
        vocabulary = draft.draft_to_target().detach().cpu()
        if not torch.equal(vocabulary, self.draft_to_target):
            raise ValueError(
                f"This held-out set holds target logits over another draft vocabulary ({self.draft_to_target.numel()} "
                f"tokens) than the drafter's ({vocabulary.numel()}). Build a HeldOutSet for this drafter "
                "(HeldOutSet.from_jsonl(..., draft=it))."
            )

    @torch.no_grad()
    def evaluate(self, draft: Eagle3DraftModel) -> HeldOutCounts:
        """Hits and positions per draft depth, and the tokens of the chain rooted at every answer position."""
        self.check_drafter(draft)
        was_training = draft.training
        draft.eval()
        counts = HeldOutCounts(self.depth)
        try:
            for input_ids, fused, target_logits, loss_mask in self.samples:
                device, dtype = draft.lm_head.weight.device, draft.lm_head.weight.dtype
                batch = TTTBatch(
                    input_ids.to(device), fused.to(device, dtype), target_logits.to(device), loss_mask.to(device)
                )
                ended = torch.isin(batch.input_ids[:, 1:], self.end_ids.to(device))  # token t + 1 ends the answer
                copied = lookup_hits(batch.input_ids, DEFAULT_MAX_NGRAM_SIZE)
                counts.add(ttt_unroll(draft, batch, self.depth, loss_rows_only=True), ended, copied)
        finally:
            draft.train(was_training)
        return counts

    def point(self, draft: Eagle3DraftModel, step: int, input_tokens_seen: int) -> HeldOutPoint:
        counts = self.evaluate(draft)
        accuracy, accepted = counts.accuracy(), torch.cat(counts.accepted)
        return HeldOutPoint(
            step=step,
            input_tokens_seen=input_tokens_seen,
            first_draft_acceptance=accuracy[0],
            step_accuracy=accuracy,
            chain_tau=1.0 + float(accepted.float().mean()) if accepted.numel() else 1.0,
            positions=int(accepted.numel()),
            in_vocabulary_acceptance=counts.hits[0] / max(counts.in_vocabulary, 1),
            draft_vocab_coverage=counts.in_vocabulary / max(counts.answers[0], 1),
            decoding_tau=1.0 + sum(counts.cycles) / len(counts.cycles) if counts.cycles else 1.0,
            copy_share=counts.copy_answers[0] / max(counts.answers[0], 1),
            copy_step_accuracy=[h / max(n, 1) for h, n in zip(counts.copy_hits, counts.copy_answers)],
            target_dtype=self.target_dtype,
            drafter_shape=drafter_shape(draft),
            heldout_set=self.digest,
        )


class HeldOutCounts:
    """Tallies of :meth:`HeldOutSet.evaluate`: a draft is a hit when it is the target's argmax and the
    draft vocabulary holds that token (the target logits are restricted to it, so without the second
    condition their argmax would be a token the target did not choose)."""

    def __init__(self, depth: int):
        self.hits, self.answers = [0] * depth, [0] * depth
        self.copy_hits, self.copy_answers = [0] * depth, [0] * depth
        self.in_vocabulary = 0
        self.accepted: list[torch.Tensor] = []
        self.cycles: list[int] = []

    def add(self, steps: list[TTTStep], ended: torch.Tensor | None = None, copied: torch.Tensor | None = None) -> None:
        """Tally one batch's unrolled steps; ``ended`` as :func:`decoding_walk` takes it; ``copied[b, j]`` says
        a prompt lookup would have proposed token ``j`` (:func:`lookup_hits`)."""
        hits = [(s.draft_argmax() == s.target_argmax) & s.mask.bool() for s in steps]
        for k, (hit, step) in enumerate(zip(hits, steps)):
            self.hits[k] += int(hit.sum())
            self.answers[k] += int(step.answer_mask.sum())
            if copied is not None:  # step k drafts token t + 2 + k
                copy = shift_positions(copied, 2 + k, hit.shape[1], fill=False) & step.answer_mask.bool()
                self.copy_hits[k] += int((hit & copy).sum())
                self.copy_answers[k] += int(copy.sum())
        self.in_vocabulary += int(steps[0].mask.sum())
        valid = steps[0].answer_mask.bool()
        chains = chain_lengths(hits, valid)
        self.accepted.append(chains[valid].cpu())
        self.cycles += decoding_walk(chains, valid, ended)

    def accuracy(self) -> list[float]:
        """Per draft depth: hits over every answer position."""
        return [h / max(n, 1) for h, n in zip(self.hits, self.answers)]
