"""``dvi``: DVI self-speculation (early-exit LoRA drafter, online learning on) with a chain."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ...drafters.dvi import DVIDrafter
from ...generation import enable
from ...policies import StaticTreePolicy
from ..arguments import MethodOptions
from .tree import Tree


class DVI(Tree):
    """``DVIDrafter`` (``--dvi-adapter`` or a fresh head at ``--dvi-exit-layer``) learning online,
    with chains of ``--dvi-depth`` (the paper's proposal depth 4 by default). The drafter keeps
    learning across questions."""

    name = "dvi"
    carries_state = True
    static_tree = False  # a chain of --dvi-depth

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        enable(model)
        if options.dvi_adapter:
            drafter = DVIDrafter.from_pretrained(options.dvi_adapter, target=model, online=True)
        else:
            drafter = DVIDrafter(model, exit_layer=options.dvi_exit_layer, online=True)
        return {
            "assistant_model": drafter,
            "assistant_policy": StaticTreePolicy.chain(options.dvi_depth),
            "return_dict_in_generate": True,
        }
