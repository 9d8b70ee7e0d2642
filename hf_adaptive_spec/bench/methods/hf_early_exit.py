"""``hf-early-exit``: transformers' self-speculation with the target's first K layers."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..arguments import MethodOptions
from .assistant_config import ASSISTANT_KNOBS, apply_assistant_knobs
from .base import BenchMethod


class HfEarlyExit(BenchMethod):
    """``generate(assistant_early_exit=K)``; draft-length knobs go on ``model.generation_config``."""

    name = "hf-early-exit"
    reads_options = ("early_exit_layers", *ASSISTANT_KNOBS)

    def learns_across_calls(self, options: MethodOptions) -> bool:
        return options.num_assistant_tokens_schedule == "heuristic"  # transformers keeps the length it adapted

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        num_layers = model.config.get_text_config().num_hidden_layers
        if not 1 <= options.early_exit_layers < num_layers:
            raise ValueError(
                f"hf-early-exit drafts with the target's first --early-exit-layers layers, which must be in "
                f"1..{num_layers - 1} for this {num_layers}-layer model (got {options.early_exit_layers}; "
                "transformers would draft nothing)."
            )
        apply_assistant_knobs(model.generation_config, options)
        return {"assistant_early_exit": options.early_exit_layers}
