"""A tiny random Llama and a word-level tokenizer with a chat template, built in memory."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]
WORDS = ["user", "assistant", "hello", "world", "how", "are", "you", "the", "cat", "sat", "on", "mat", "what", "is",
         "two", "plus", "one", "tell", "me", "more"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
    "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


def build_tiny_tokenizer(pad_token: str = "<pad>") -> PreTrainedTokenizerFast:
    """The word-level test tokenizer; ``pad_token="<|im_end|>"`` pads with end-of-sequence like SmolLM2."""
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=pad_token,
        unk_token="<unk>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@pytest.fixture(scope="session")
def make_tiny_tokenizer() -> Callable[[str], PreTrainedTokenizerFast]:
    return build_tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_tokenizer() -> PreTrainedTokenizerFast:
    return build_tiny_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tiny_tokenizer.pad_token_id,
        eos_token_id=tiny_tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config).eval()
