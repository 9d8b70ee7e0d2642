"""Spec-Bench's multi-turn prompts: each turn sees the earlier turns and the reference answers."""

from __future__ import annotations

import torch
from transformers import PreTrainedTokenizerBase


def turn_prompt_ids(
    tokenizer: PreTrainedTokenizerBase, user_turns: list[str] | tuple[str, ...], answers: list[list[int]]
) -> torch.LongTensor:
    """Chat-template prompt for turn ``len(answers)``.

    Args:
        tokenizer: tokenizer with a chat template.
        user_turns: the question's user messages; the first ``len(answers) + 1`` are used.
        answers: token ids of the answers to the earlier turns (``stock``'s, so that every
            method sees the same conversation).

    Returns:
        ``[1, prompt_len]`` token ids ending with the assistant generation prompt.
    """
    messages = []
    for user, answer in zip(user_turns, answers, strict=False):
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": tokenizer.decode(answer, skip_special_tokens=True).strip()})
    messages.append({"role": "user", "content": user_turns[len(answers)]})
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    return torch.tensor([ids], dtype=torch.long)
