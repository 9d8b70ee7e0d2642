"""``stock``: plain ``model.generate``, the baseline of every speedup."""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ...core.compiled import inductor_settings
from ..arguments import MethodOptions
from .base import BenchMethod, SpeculationStatsLike


class Stock(BenchMethod):
    """One target forward per token; its outputs are the reference for the identity check."""

    name = "stock"

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        return {}


class StockCompiled(Stock):
    """transformers' own fast path for stock ``generate``: a fixed StaticCache (reset per call) and a
    ``compile_config``, so that the decode step runs a compiled graph and the prefill stays eager;
    the same compile configuration and cache length as the engine's ``--compile`` methods
    (``stock-compiled+sized``: the cache each call of ``<method>+sized`` decodes in)."""

    name = "stock-compiled"
    always_fast_path = True

    def generate(self, input_ids: torch.LongTensor) -> tuple[list[int], SpeculationStatsLike | None]:
        # inductor reads weight freezing when it compiles, inside generate: set it around the call
        with inductor_settings(self.generate_kwargs["compile_config"].to_dict()):
            return super().generate(input_ids)
