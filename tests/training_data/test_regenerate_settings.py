"""Regeneration settings that silently changed the data: the sampling distribution, bad values, repeated ids."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from hf_adaptive_spec.training_data.regenerate import (
    RegenerationConfig,
    copy_conversations,
    generate_reply_ids,
    prompt_ids,
    regenerate,
)
from hf_adaptive_spec.training_data.sharegpt import Conversation


@pytest.mark.parametrize("setting", [{"top_k": 1}, {"top_p": 0.01}])
def test_sampling_draws_from_the_whole_distribution_whatever_the_generation_config_says(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, monkeypatch, setting: dict
) -> None:
    """A target whose generation_config truncates sampling (or generate's own default top-k of 50) must not narrow
    the regenerated answers: temperature > 0 samples softmax(logits / T), as the benchmark does. With top-k 1 (or a
    tiny top-p) left on, every sample was the greedy answer."""
    for name, value in setting.items():
        monkeypatch.setattr(tiny_model.generation_config, name, value)
    prompts = [prompt_ids(tiny_tokenizer, [{"role": "user", "content": "hello world"}])] * 4
    torch.manual_seed(0)
    replies, _, _ = generate_reply_ids(tiny_model, tiny_tokenizer, prompts, RegenerationConfig(max_new_tokens=8,
                                                                                               temperature=1.0))
    assert len({tuple(reply) for reply in replies}) > 1


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"max_turns": 0}, "max_turns must be >= 1"),  # wrote every conversation empty and marked it done
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
        ({"max_prompt_tokens": 0}, "max_prompt_tokens must be >= 1"),
        ({"temperature": -0.5}, "temperature must be 0 \\(greedy\\) or positive"),  # decoded greedily
    ],
)
def test_settings_that_would_write_wrong_data_are_refused(setting: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RegenerationConfig(**setting)


def _conversation(conversation_id: str, question: str) -> Conversation:
    return Conversation(id=conversation_id, messages=[{"role": "user", "content": question},
                                                      {"role": "assistant", "content": "original answer"}])


def test_a_repeated_id_is_refused_before_anything_is_written(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    """Each record was written once per occurrence of its id (two records under one id, and a resumed run could
    not tell which was done)."""
    conversations = [_conversation("a", "hello world"), _conversation("b", "how are you"),
                     _conversation("a", "the cat sat on the mat")]
    output = tmp_path / "regenerated.jsonl"
    with pytest.raises(ValueError, match="'a' comes twice"):
        regenerate(tiny_model, tiny_tokenizer, conversations, output, RegenerationConfig(max_new_tokens=2))
    with pytest.raises(ValueError, match="'a' comes twice"):
        copy_conversations(conversations, output)
    assert not output.exists()
