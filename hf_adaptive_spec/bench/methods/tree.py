"""``tree``: this project's static-tree speculative decoding with a small causal-LM drafter; ``plain-steps``:
the same engine drafting nothing."""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ...drafters import CausalLMDrafter
from ...generation import enable
from ...policies import StaticTreePolicy
from ..arguments import MethodOptions
from .base import BenchMethod, SpeculationStatsLike, new_token_ids


class Tree(BenchMethod):
    """``hfas.enable(model)`` + ``CausalLMDrafter.from_target_layers`` + ``StaticTreePolicy``."""

    name = "tree"
    runs_engine = True
    static_tree = True
    reads_options = ("drafter_layers",)

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        enable(model)
        drafter = CausalLMDrafter.from_target_layers(model, num_layers=options.drafter_layers)
        policy = StaticTreePolicy(
            depth=options.tree_depth, top_k=options.tree_top_k, total_tokens=options.tree_total_tokens
        )
        return {"assistant_model": drafter, "assistant_policy": policy, "return_dict_in_generate": True}

    def generate(self, input_ids: torch.LongTensor) -> tuple[list[int], SpeculationStatsLike | None]:
        out = self.model.generate(input_ids=input_ids, **self.call_kwargs(input_ids))
        return new_token_ids(out.sequences, input_ids), out.speculation


class PlainSteps(Tree):
    """The engine with ``StaticTreePolicy(depth=0)``: one-token steps, nothing drafted or verified
    beyond the next token. Against ``stock`` it measures the engine alone (its bookkeeping, and on
    CPU its faster lm_head layout), so a speculative method's gain over it is what speculation adds."""

    name = "plain-steps"
    static_tree = False
    reads_options = ()

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        enable(model)
        policy = StaticTreePolicy(depth=0, top_k=1, total_tokens=1)  # drafts nothing: no assistant_model needed
        return {"assistant_policy": policy, "return_dict_in_generate": True}
