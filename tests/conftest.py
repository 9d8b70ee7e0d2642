"""Shared fixtures of the fast tier; the factories live in tiny_models.py."""

from __future__ import annotations

import contextlib
from pathlib import Path

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


@pytest.fixture
def crash_mid_write():
    """A context manager in which ``Path.write_text`` writes half its text and stops as a killed process would (a
    ``KeyboardInterrupt``, which must end the block): what a crash mid-write leaves on disk."""
    real = Path.write_text

    def cut(self, text, *args, **kwargs):
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def crashing():
        with pytest.raises(KeyboardInterrupt), pytest.MonkeyPatch.context() as patch:
            patch.setattr(Path, "write_text", cut)
            yield

    return crashing
