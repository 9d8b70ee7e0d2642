"""The stopping criteria's verdicts on a cycle's tokens, read from the device once per cycle.

Stock ``generate`` asks its criteria after each token and reads the verdict (one synchronisation per token on a GPU).
A cycle appends several tokens at once; asking about each of their prefixes before reading any verdict gives the
same first stop, read once, where the criteria are functions of what they are given: transformers' own, which
``generate`` builds from the generation config. A criterion of the caller's (``stopping_criteria=``) may keep state
between calls, so it is asked prefix by prefix and no further than the first stop, as stock asks it.

The logits processors alike: stock processes a token's row only while no criterion has stopped. transformers' own
processors are functions of what they are given, so a cycle may process its accepted path's rows before the criteria
are asked about any of its tokens; a processor of the caller's (``logits_processor=``, ``prefix_allowed_tokens_fn``)
may keep state or refuse a prefix past the end of the sequence, so the walk emits each token, asking the criteria,
before it processes the next row (:func:`processed_together`).
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessorList, StoppingCriteriaList
from transformers.generation import logits_process
from transformers.generation.stopping_criteria import (
    EosTokenCriteria,
    MaxLengthCriteria,
    MaxTimeCriteria,
    StopStringCriteria,
)

#: transformers' criteria whose verdict depends on their arguments (and the clock) alone: exact types, not subclasses
STATELESS_CRITERIA = (EosTokenCriteria, MaxLengthCriteria, MaxTimeCriteria, StopStringCriteria)


#: transformers' logits processors whose output depends on their arguments alone (exact types, not subclasses): the
#: warpers, penalties, bans, forced tokens and biases ``generate`` builds from a generation config
STATELESS_PROCESSORS = tuple(
    getattr(logits_process, name)
    for name in (
        "TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper", "TopHLogitsWarper",
        "TypicalLogitsWarper", "EpsilonLogitsWarper", "EtaLogitsWarper", "RepetitionPenaltyLogitsProcessor",
        "EncoderRepetitionPenaltyLogitsProcessor", "NoRepeatNGramLogitsProcessor",
        "EncoderNoRepeatNGramLogitsProcessor", "NoBadWordsLogitsProcessor", "SequenceBiasLogitsProcessor",
        "MinLengthLogitsProcessor", "MinNewTokensLengthLogitsProcessor", "SuppressTokensLogitsProcessor",
        "SuppressTokensAtBeginLogitsProcessor", "ForcedBOSTokenLogitsProcessor", "ForcedEOSTokenLogitsProcessor",
        "ExponentialDecayLengthPenalty", "InfNanRemoveLogitsProcessor", "LogitNormalization",
    )
    if hasattr(logits_process, name)
)


def processed_together(processors: LogitsProcessorList) -> bool:
    """Whether a cycle's accepted path may be processed row by row before the criteria are asked about its tokens:
    no processors, or transformers' stateless ones alone. Otherwise each token is emitted before the next row is
    processed, so no processor of the caller's sees a prefix stock never builds (past a stop)."""
    return type(processors) is LogitsProcessorList and all(type(p) in STATELESS_PROCESSORS for p in processors)


def asked_together(criteria: StoppingCriteriaList) -> bool:
    """Whether every criterion may be asked about all of a cycle's prefixes before a verdict is read."""
    return type(criteria) is StoppingCriteriaList and all(type(c) in STATELESS_CRITERIA for c in criteria)


def first_stop(
    criteria: StoppingCriteriaList, sequence: torch.LongTensor, new_tokens: int, scores: tuple | None,
    together: bool | None = None,
) -> int | None:
    """Of the last ``new_tokens`` of ``sequence`` ``[1, T]``, how many stock keeps when a criterion stops among them:
    up to and including the first whose prefix a criterion stops at; None when none does. ``scores``: the rows
    ``generate`` returns so far, one per token through the last, or None; each prefix is asked with its own.
    ``together``: :func:`asked_together` of ``criteria``, when the caller knows it (None: found here)."""
    start = sequence.shape[1] - new_tokens
    prior = None if scores is None else len(scores) - new_tokens

    def stops(count: int) -> torch.Tensor:
        return criteria(sequence[:, : start + count], None if scores is None else scores[: prior + count]).any()

    if asked_together(criteria) if together is None else together:
        verdicts = torch.stack([stops(count) for count in range(1, new_tokens + 1)]).tolist()  # one read
        return next((count for count, stop in enumerate(verdicts, 1) if stop), None)
    return next((count for count in range(1, new_tokens + 1) if bool(stops(count))), None)
