"""Prompt + completion records for DVI's replay rollout, from JSONL files of target-answered conversations."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from ...training_data.regenerate import prompt_ids


def completion_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]], prompt: list[int]) -> list[int]:
    """Tokens of the assistant turn ``messages[1]`` after ``prompt``, through the end-of-turn token."""
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if ids[: len(prompt)] != prompt:
        raise ValueError("The chat template tokenizes the prompt differently inside the conversation; cannot align.")
    answer = ids[len(prompt) :]
    eos = tokenizer.eos_token_id
    return answer[: answer.index(eos) + 1] if eos in answer else answer


def load_completions(
    tokenizer: PreTrainedTokenizerBase, path: str | Path | None, num_prompts: int, max_prompt_tokens: int
) -> list[dict[str, list[int]]]:
    """``{"input_ids", "completion_ids"}`` of the first ``num_prompts`` usable records of ``path``.

    Each record of the JSONL file (``trainers/regenerate_sharegpt.py`` output) contributes its
    first user turn (chat template, generation prompt) and the assistant's answer to it, ending
    with the end-of-turn token. Prompts longer than ``max_prompt_tokens`` are skipped.
    """
    if not path:
        raise ValueError("rollout=replay needs --completions_path: a JSONL file of target-answered conversations.")
    records = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            messages = json.loads(line)["conversation"][:2]
            prompt = prompt_ids(tokenizer, messages[:1])
            if len(prompt) <= max_prompt_tokens:
                records.append({"input_ids": prompt, "completion_ids": completion_ids(tokenizer, messages, prompt)})
            if len(records) == num_prompts:
                return records
    raise ValueError(
        f"{path} holds {len(records)} usable conversations; {num_prompts} were asked for. Regenerate more with "
        "trainers/regenerate_sharegpt.py, or ask for fewer prompts."
    )
