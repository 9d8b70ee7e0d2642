"""``stock``: plain ``model.generate``, the baseline of every speedup."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..arguments import MethodOptions
from .base import BenchMethod


class Stock(BenchMethod):
    """One target forward per token; its outputs are the reference for the identity check."""

    name = "stock"

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        return {}
