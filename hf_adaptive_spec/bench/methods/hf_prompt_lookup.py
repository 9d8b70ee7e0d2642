"""``hf-prompt-lookup``: transformers' n-gram prompt lookup decoding."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..arguments import MethodOptions
from .base import BenchMethod


class HfPromptLookup(BenchMethod):
    """``generate(prompt_lookup_num_tokens=N)``: drafts copied from earlier n-gram matches."""

    name = "hf-prompt-lookup"
    reads_options = ("prompt_lookup_num_tokens",)

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        return {"prompt_lookup_num_tokens": options.prompt_lookup_num_tokens}
