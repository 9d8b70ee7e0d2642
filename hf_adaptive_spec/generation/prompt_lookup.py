"""Prompt lookup branch: what followed the latest earlier match of the context's last n-gram,
grafted onto the model-drafted tree as one more chain (transformers' ``prompt_lookup_num_tokens``).

Copying from the prompt (summaries, retrieval answers, code edits) is where a small drafter is
weakest and a lookup is nearly free; the target verifies both in the same forward.
"""

from __future__ import annotations

import torch
from transformers import GenerationConfig

from ..core.settings import DEFAULT_MAX_NGRAM_SIZE
from ..core.tree import DraftTree


def lookup_continuation(sequence: torch.LongTensor, max_ngram_size: int, num_tokens: int) -> list[int]:
    """Up to ``num_tokens`` tokens that followed the most recent earlier occurrence of the
    sequence's last ``n`` tokens, trying ``n = max_ngram_size, ..., 1``; ``[]`` when none matches.

    ``sequence`` is ``[T]``; an occurrence counts when at least one token follows it before the end.
    """
    length = sequence.shape[0]
    for size in range(min(max_ngram_size, length - 1), 0, -1):
        windows = sequence[: length - 1].unfold(0, size, 1)  # starts 0 .. length-1-size
        starts = torch.nonzero((windows == sequence[length - size :]).all(dim=1)).flatten()
        if starts.numel():
            begin = int(starts[-1]) + size
            return sequence[begin : begin + num_tokens].tolist()
    return []


class NgramIndex:
    """:func:`lookup_continuation` of a growing sequence kept on the host: where each n-gram of up to
    ``max_ngram_size`` tokens last occurred with a token after it, updated as tokens are appended, so a
    lookup reads nothing from the device (on a GPU each read is a synchronisation) and costs the same
    whatever the sequence's length."""

    def __init__(self, max_ngram_size: int):
        self.max_ngram_size = max_ngram_size
        self.tokens: list[int] = []
        self.ends: dict[tuple[int, ...], int] = {}  # n-gram -> index of the token after its latest occurrence

    def extend(self, tokens: list[int]) -> None:
        """Append ``tokens``, each recorded as the token after the n-grams that end just before it."""
        for token in tokens:
            end = len(self.tokens)  # the new token follows the n-grams ending before it
            for size in range(1, min(self.max_ngram_size, end) + 1):
                self.ends[tuple(self.tokens[end - size :])] = end
            self.tokens.append(token)

    def continuation(self, num_tokens: int) -> list[int]:
        """``lookup_continuation(tokens, max_ngram_size, num_tokens)``."""
        length = len(self.tokens)
        for size in range(min(self.max_ngram_size, length - 1), 0, -1):
            end = self.ends.get(tuple(self.tokens[length - size :]))
            if end is not None:
                return self.tokens[end : end + num_tokens]
        return []


def lookup_hits(input_ids: torch.LongTensor, max_ngram_size: int) -> torch.BoolTensor:
    """``[B, S]``: whether :func:`lookup_continuation` of the tokens before position ``j`` proposes token ``j``
    first, for every position of every row at once (the tokens a prompt lookup would have copied).

    ``hits[:, j]`` is ``lookup_continuation(input_ids[b, :j], max_ngram_size, 1) == [input_ids[b, j]]``. The
    occurrence of an n-gram whose next token is ``e`` matches the last ``n`` tokens before ``j`` when
    ``input_ids[e - m] == input_ids[j - m]`` for ``m = 1..n`` (``e < j``); the longest ``n`` with a match
    wins, then its latest ``e``. Right padding leaves the positions before it unchanged.
    """
    if max_ngram_size < 1:
        raise ValueError(f"max_ngram_size must be at least 1, got {max_ngram_size}.")
    length = input_ids.shape[1]
    equal = input_ids[:, :, None] == input_ids[:, None, :]  # [B, j, e]
    index = torch.arange(length, device=input_ids.device, dtype=torch.int32)
    earlier = index[None, :] < index[:, None]  # e < j
    proposal = torch.full_like(input_ids, -1)
    matches = earlier.expand_as(equal).clone()
    for size in range(1, max_ngram_size + 1):
        shifted = torch.zeros_like(equal)
        shifted[:, size:, size:] = equal[:, : length - size, : length - size]  # equal[j - size, e - size]
        matches &= shifted
        latest = (matches * index).amax(dim=2).long()  # the latest e that matches; e >= size, so 0 is none
        proposal = torch.where(latest > 0, input_ids.gather(1, latest), proposal)
    return proposal == input_ids


def graft_chain(tree: DraftTree, chain: list[int]) -> int:
    """Add ``chain`` below the root, reusing nodes that already spell its prefix; returns the
    number of new nodes. New nodes carry their parent's score (they are not model drafts).

    A node whose children were sampled (``tree.proposal_probs``) takes no new child: rejection sampling would treat
    it as one more draw from the node's draft distribution, and the output would no longer follow the target's."""
    node, added = 0, 0
    for token in chain:
        child = next((c for c in tree.children(node) if tree.tokens[c] == token), None)
        if child is None:
            if node in tree.proposal_probs:
                raise ValueError(
                    f"Cannot graft the prompt-lookup token {token} below node {node}, whose children were sampled from "
                    "the drafter (TreeConfig.sample_drafts): it is not a draw from their distribution, and sampling "
                    "would no longer be exact. Graft no chain onto a sampled tree (the engine drops it)."
                )
            child = tree.add_children(node, [token], [0.0])[0]
            added += 1
        node = child
    return added


class LookupBranch:
    """The prompt-lookup branch's settings (``prompt_lookup_num_tokens``, ``max_matching_ngram_size``) and, while a
    call decodes with it, the host's copy of the sequence it looks up in (:class:`NgramIndex`)."""

    def __init__(self, num_tokens: int, ngram_size: int):
        self.num_tokens, self.ngram_size = num_tokens, ngram_size
        self.index = NgramIndex(ngram_size)

    @classmethod
    def from_config(cls, config: GenerationConfig) -> LookupBranch:
        for name, value in (("prompt_lookup_num_tokens", config.prompt_lookup_num_tokens),
                            ("max_matching_ngram_size", config.max_matching_ngram_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer (or None), got {value!r}.")
        num_tokens = config.prompt_lookup_num_tokens or 0
        return cls(num_tokens, config.max_matching_ngram_size or DEFAULT_MAX_NGRAM_SIZE)

    def start(self, sequence: torch.LongTensor) -> None:
        """Copy ``sequence`` ``[1, T]`` to the host (one read per call), when the branch is on."""
        if self.num_tokens:
            self.index.extend(sequence[0].tolist())

    def extend(self, tokens: list[int]) -> None:
        """The tokens the output appended since."""
        if self.num_tokens:
            self.index.extend(tokens)

    def chain(self, sequence: torch.LongTensor, room: int) -> list[int]:
        """The tokens that followed the latest earlier occurrence of ``sequence``'s last n-gram."""
        if room <= 0:
            return []
        if len(self.index.tokens) != sequence.shape[1]:
            raise RuntimeError("The prompt-lookup branch's copy of the sequence is out of step with the output.")
        return self.index.continuation(min(self.num_tokens, room))
