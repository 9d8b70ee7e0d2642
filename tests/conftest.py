"""Shared fixtures of the fast tier; the factories live in tiny_models.py."""

from __future__ import annotations

import pytest
from transformers import PreTrainedTokenizerFast

from tiny_models import make_char_tokenizer, tiny_model


@pytest.fixture(scope="session")
def llama():
    return tiny_model("llama")


@pytest.fixture(scope="session")
def char_tokenizer() -> PreTrainedTokenizerFast:
    return make_char_tokenizer()
