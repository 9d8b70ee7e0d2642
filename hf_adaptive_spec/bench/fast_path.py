"""The compiled fast path as the bench runs it: one compile configuration and one StaticCache,
shared by ``stock-compiled`` (transformers' own path) and every ``--compile`` engine method, so
that both sides of each comparison run with the same compiler options and the same cache length."""

from __future__ import annotations

from transformers import PreTrainedModel, PreTrainedTokenizerBase, StaticCache

from ..core.static_cache import full_length_static_cache
from ..generation.static_path import DEFAULT_BUCKETS, fast_path, fast_path_compile_config
from .conversation import turn_prompt_ids
from .questions import Question


def shared_static_cache(model: PreTrainedModel, max_cache_len: int) -> StaticCache:
    """One StaticCache per model and length, reset by each method before its call; sliding-window layers full-length
    (:func:`~hf_adaptive_spec.core.static_cache.full_length_static_cache`: the engine's trees need it, and stock's
    masks apply the windows there too)."""
    caches = model.__dict__.setdefault("_bench_static_caches", {})
    if max_cache_len not in caches:
        caches[max_cache_len] = full_length_static_cache(model.config, max_cache_len)
    return caches[max_cache_len]


def sized_cache_length(model: PreTrainedModel, prompt_length: int, max_new_tokens: int) -> int:
    """The cache the engine makes for one call of its own (prompt, new tokens, its largest verification bucket,
    rounded up as :meth:`FastPath.rounded_cache_length` rounds): a static cache attends over every slot, so a shorter
    one is a cheaper cycle."""
    path = fast_path(model)
    return path.rounded_cache_length(path.needed_slots(prompt_length + max_new_tokens))


def sized_cache_lengths(model: PreTrainedModel, max_new_tokens: int, max_cache_len: int) -> list[int]:
    """Every cache length a ``+sized`` call of ``max_new_tokens`` can decode in: the engine's sizes from the
    shortest prompt's up, capped at ``max_cache_len``."""
    path, lengths = fast_path(model), []
    length = sized_cache_length(model, 1, max_new_tokens)
    while length < max_cache_len:
        lengths.append(length)
        length = path.rounded_cache_length(length + 1)
    return lengths + [max_cache_len]


def longest_prompt(model: PreTrainedModel, cache_length: int, max_new_tokens: int) -> int:
    """The longest prompt whose call of ``max_new_tokens`` (and last tree, padded to the largest bucket) fits
    ``cache_length`` slots."""
    return cache_length - fast_path(model).needed_slots(max_new_tokens)


def static_cache_length(
    tokenizer: PreTrainedTokenizerBase, questions: list[Question], max_new_tokens: int, granularity: int = 128
) -> int:
    """Slots that fit every question's last turn: its turns' text, a chat-template allowance per turn (what the
    template adds to an empty first turn, its system prompt included, and at least 16), an answer of
    ``max_new_tokens`` per earlier turn, the new tokens and the largest verification bucket, rounded up to
    ``granularity``."""
    template_allowance = max(16, turn_prompt_ids(tokenizer, [""], []).shape[1])
    longest = 0
    for question in questions:
        text_tokens = sum(len(tokenizer(turn, add_special_tokens=False)["input_ids"]) for turn in question.turns)
        turns = len(question.turns)
        longest = max(longest, text_tokens + turns * (template_allowance + max_new_tokens))
    needed = longest + 1 + DEFAULT_BUCKETS[-1]
    return -(-needed // granularity) * granularity


def first_turn_slots(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, questions: list[Question], max_new_tokens: int
) -> dict[int | str, int]:
    """The slots each question's first turn needs on the fast path (its chat-template prompt, ``max_new_tokens``
    and the last tree padded to the largest bucket), by question id. A first turn's prompt is known before the
    run; later turns' grow with the answers, which only the run knows."""
    path = fast_path(model)
    return {
        question.question_id: path.needed_slots(
            turn_prompt_ids(tokenizer, question.turns, []).shape[1] + max_new_tokens
        )
        for question in questions
    }


__all__ = [
    "fast_path_compile_config",
    "first_turn_slots",
    "longest_prompt",
    "shared_static_cache",
    "sized_cache_length",
    "sized_cache_lengths",
    "static_cache_length",
]
