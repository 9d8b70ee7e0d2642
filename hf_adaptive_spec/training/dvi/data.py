"""Prompt + completion records for DVI's replay rollout, from JSONL files of target-answered conversations."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from ...training_data.leakage import leaks
from ...training_data.regenerate import prompt_ids
from ...training_data.sharegpt import Conversation


def completion_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]], prompt: list[int]) -> list[int]:
    """Tokens of the assistant turn ``messages[1]`` after ``prompt``, through the end-of-turn token (without one for
    an answer marked ``truncated``: ``max_new_tokens`` cut it, and the target went on)."""
    truncated = bool(messages[-1].get("truncated"))
    text = tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=truncated)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if ids[: len(prompt)] != prompt:
        raise ValueError("The chat template tokenizes the prompt differently inside the conversation; cannot align.")
    answer = ids[len(prompt) :]
    eos = tokenizer.eos_token_id
    return answer[: answer.index(eos) + 1] if eos in answer else answer


def load_completions(
    tokenizer: PreTrainedTokenizerBase, path: str | Path | None, num_prompts: int, max_prompt_tokens: int,
    digests: frozenset[str] = frozenset(),
) -> list[dict[str, list[int]]]:
    """``{"input_ids", "completion_ids"}`` of the first ``num_prompts`` usable records of ``path``.

    Each record of the JSONL file (``trainers/regenerate_sharegpt.py`` output) contributes its
    first user turn (chat template, generation prompt) and the assistant's answer to it, ending
    with the end-of-turn token. Prompts longer than ``max_prompt_tokens`` are skipped, and so are conversations
    a user turn of which is an evaluation question (``digests``: :func:`~hf_adaptive_spec.training_data.eval_question_digests`).
    """
    if not path:
        raise ValueError("rollout=replay needs --completions_path: a JSONL file of target-answered conversations.")
    records = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if leaks(Conversation(str(record.get("id")), record["conversation"]), digests):
                continue
            messages = record["conversation"][:2]
            prompt = prompt_ids(tokenizer, messages[:1])
            if len(prompt) <= max_prompt_tokens:
                records.append({"input_ids": prompt, "completion_ids": completion_ids(tokenizer, messages, prompt)})
            if len(records) == num_prompts:
                return records
    raise ValueError(
        f"{path} holds {len(records)} usable conversations; {num_prompts} were asked for. Regenerate more with "
        "trainers/regenerate_sharegpt.py, or ask for fewer prompts."
    )
