"""A tiny random Llama with a byte-level chat tokenizer, saved once per session, and question files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

QUESTIONS = [
    {"question_id": 1, "category": "writing", "turns": ["Write a poem.", "Make it shorter."]},
    {"question_id": 2, "category": "math", "turns": ["What is 2+2?", "And 3+3?"]},
    {"question_id": 3, "category": "writing", "turns": ["Write a story."]},
]


def byte_chat_tokenizer() -> PreTrainedTokenizerFast:
    """Every byte is a token (no merges), plus ChatML specials and a chat template."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={char: i for i, char in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHATML,
    )


@pytest.fixture(scope="session")
def bench_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder with a saved 4-layer random Llama and its tokenizer (for ``--model``)."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = byte_chat_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=0.3,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def bench_model(bench_model_dir: Path):
    """A fresh ``(model, tokenizer)`` loaded from :func:`bench_model_dir`."""
    model = AutoModelForCausalLM.from_pretrained(bench_model_dir).eval()
    return model, AutoTokenizer.from_pretrained(bench_model_dir)


@pytest.fixture
def questions_file(tmp_path: Path) -> Path:
    """Three questions: two 2-turn ``writing``/``math`` ones and a 1-turn ``writing`` one."""
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(question) + "\n" for question in QUESTIONS))
    return path
