"""The environments' tests record and replay one tiny random Llama, built once per test module."""

from __future__ import annotations

import pytest
from tiny_models import tiny_model


@pytest.fixture(scope="module")
def target():
    return tiny_model("llama")
