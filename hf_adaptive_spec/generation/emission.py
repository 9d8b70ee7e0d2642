"""What a cycle emits, and the scores it chooses from: the output sequence under construction (its stopping criteria,
streamer and returned scores) and the processed scores per tree node the acceptance walk reads."""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import GenerationConfig, LogitsProcessorList
from transformers.generation.streamers import BaseStreamer

from ..core.transfer import upload
from ..core.tree import DraftTree
from .acceptance import StopsAfter
from .stopping import asked_together, first_stop
from .targets import TreeLogits

RowAt = Callable[[int], torch.Tensor]
"""The scores row ``[vocab]`` an emitted token (by its index among a cycle's) was chosen from."""


class OutputSequence:
    """Appends emitted tokens, applying the stopping criteria to each (``stopping.first_stop``)."""

    def __init__(self, input_ids, stopping_criteria, config: GenerationConfig, streamer: BaseStreamer | None):
        self.sequence = input_ids
        self.stopping_criteria = stopping_criteria
        self.criteria_together = asked_together(stopping_criteria)  # fixed for the call, asked at every emit
        self.streamer = streamer
        wants_dict = config.return_dict_in_generate
        self.scores = () if wants_dict and config.output_scores else None
        self.raw_logits = () if wants_dict and config.output_logits else None
        self.finished = False
        self.last_token: int | None = None  # the last token appended, known on the host: a cycle's tree root

    def emit(self, tokens: list[int], score_row: RowAt, raw_row: RowAt, on_device: torch.Tensor | None = None) -> int:
        """Append ``tokens`` (``on_device``: the same ``[1, len(tokens)]`` already uploaded, else one upload here),
        stopping after the first token the criteria stop at; returns how many were appended. ``score_row(i)`` and
        ``raw_row(i)``: the processed and raw scores ``[vocab]`` the ``i``-th token came from, asked for only when
        the output returns them."""
        base = self.sequence.shape[1]
        if on_device is None:
            on_device = upload([tokens], self.sequence)
        extended = torch.cat([self.sequence, on_device], dim=-1)
        scores, raw_logits = self.scores, self.raw_logits
        # copies: a row may be a view of a compiled graph's output, which its next replay overwrites (CUDA graphs)
        if scores is not None:
            scores += tuple(score_row(i)[None].clone() for i in range(len(tokens)))
        if raw_logits is not None:
            raw_logits += tuple(raw_row(i)[None].clone() for i in range(len(tokens)))
        stop = first_stop(self.stopping_criteria, extended, len(tokens), scores, self.criteria_together)
        self.finished = stop is not None
        kept = len(tokens) if stop is None else stop
        if scores is not None:
            self.scores = scores[: len(scores) - len(tokens) + kept]
        if raw_logits is not None:
            self.raw_logits = raw_logits[: len(raw_logits) - len(tokens) + kept]
        self.sequence = extended[:, : base + kept]
        if self.streamer is not None and kept:
            # [1, k] on the host, as assisted decoding
            self.streamer.put(torch.tensor([tokens[:kept]], dtype=self.sequence.dtype, device="cpu"))
        self.last_token = tokens[kept - 1] if kept else self.last_token
        return kept


def emitting_each_token(out: OutputSequence, scores: TreeScores, tree_logits: TreeLogits) -> StopsAfter:
    """For a walk whose processors are the caller's: each token it chooses is emitted, and the stopping criteria
    asked, before it processes the next row, as stock interleaves them: no processor sees a prefix past a stop."""

    def emit(node: int, token: int) -> bool:
        out.emit([token], lambda _: scores(node), lambda _: tree_logits[node])
        return out.finished

    return emit


class TreeScores:
    """Processed target scores per tree node, computed on demand along the acceptance walk.

    Without logits processors a node's scores are its logits row. With them, the processors see the sequence
    and the tokens of the path to the node, built on the device from the parent's by one slice of the tree's
    tokens there (the verification's input, else one upload per cycle), not one upload per node."""

    def __init__(self, tree: DraftTree, logits: TreeLogits, sequence: torch.Tensor, processor: LogitsProcessorList):
        self.tree, self.logits, self.sequence, self.processor = tree, logits, sequence, processor
        self.cache: dict[int, torch.Tensor] = {}
        self._prefixes: dict[int, torch.Tensor] = {0: sequence}
        self._tokens: torch.Tensor | None = logits.tokens

    def __call__(self, node: int) -> torch.Tensor:
        if not self.processor:
            return self.logits[node]
        if node not in self.cache:
            self.cache[node] = self.processor(self._prefix(node), self.logits[node][None].clone())[0]
        return self.cache[node]

    def argmaxes(self) -> list[int | None] | None:
        """Every node's argmax read at once (``TreeLogits.argmaxes``) where the scores are the rows themselves."""
        return None if self.processor else self.logits.argmaxes()

    def _prefix(self, node: int) -> torch.Tensor:
        """``[1, T + depth]``: the sequence, then the tokens of the path to ``node`` after the root."""
        if node not in self._prefixes:
            parent = self._prefix(self.tree.parents[node])
            if self._tokens is None:
                self._tokens = upload([self.tree.tokens], self.sequence)
            self._prefixes[node] = torch.cat([parent, self._tokens[:, node : node + 1]], dim=-1)
        return self._prefixes[node]
