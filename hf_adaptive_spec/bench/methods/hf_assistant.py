"""``hf-assistant``: transformers' assisted generation with a small causal LM."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ...drafters import truncated_causal_lm
from ..arguments import MethodOptions
from .assistant_config import ASSISTANT_KNOBS, apply_assistant_knobs
from .base import BenchMethod


class HfAssistant(BenchMethod):
    """``generate(assistant_model=small)``, the small model being the target's first layers.

    It drafts with the same truncated model as ``tree``, so the two differ only in the engine.
    """

    name = "hf-assistant"
    reads_options = ("drafter_layers", *ASSISTANT_KNOBS)

    def learns_across_calls(self, options: MethodOptions) -> bool:
        return options.num_assistant_tokens_schedule == "heuristic"  # transformers keeps the length it adapted

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        assistant = truncated_causal_lm(model, num_layers=options.drafter_layers)
        apply_assistant_knobs(assistant.generation_config, options)
        return {"assistant_model": assistant}
