"""Shared fixtures of the fast tier; the factories live in tiny_models.py."""

from __future__ import annotations

import pytest
from tiny_models import make_char_tokenizer, tiny_model
from transformers import PreTrainedTokenizerFast


@pytest.fixture(scope="session")
def llama():
    return tiny_model("llama")


@pytest.fixture(scope="session")
def char_tokenizer() -> PreTrainedTokenizerFast:
    return make_char_tokenizer()


@pytest.fixture(scope="session", autouse=True)
def package_dir(tmp_path_factory):
    """Ahead-of-time packages (FastPath on a CPU with weight freezing) go to a temporary folder,
    never to the user's ~/.cache."""
    import os

    from hf_adaptive_spec.core.packaged import PACKAGE_DIR_ENV

    folder = tmp_path_factory.mktemp("packages")
    previous = os.environ.get(PACKAGE_DIR_ENV)
    os.environ[PACKAGE_DIR_ENV] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop(PACKAGE_DIR_ENV, None)
    else:
        os.environ[PACKAGE_DIR_ENV] = previous
