"""``dvi``: DVI self-speculation (early-exit LoRA drafter, online learning on) with a chain."""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from peft import get_peft_model_state_dict
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

    def own_options_read(self, options: MethodOptions) -> set[str]:
        """A saved adapter exits where it was trained: ``--dvi-exit-layer`` places a fresh head only."""
        return {"dvi_adapter", "dvi_depth", *(() if options.dvi_adapter else ("dvi_exit_layer",))}

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        enable(model)
        if options.dvi_adapter:
            drafter = DVIDrafter.from_pretrained(options.dvi_adapter, target=model, online=True)
        else:
            drafter = DVIDrafter(model, exit_layer=options.dvi_exit_layer, online=True)
        self._adapter_digest = adapter_digest(drafter) if options.dvi_adapter else None
        return {
            "assistant_model": drafter,
            "assistant_policy": StaticTreePolicy.chain(options.dvi_depth),
            "return_dict_in_generate": True,
        }

    def loaded_digests(self) -> dict[str, str]:
        """The adapter's weights as loaded (a fresh head is drawn anew each run, and the head learns online: the
        digest is taken before the first call)."""
        return {"adapter": self._adapter_digest} if self._adapter_digest else {}


def adapter_digest(drafter: DVIDrafter) -> str:
    """A digest of the LoRA adapter's weights (what ``--dvi_adapter`` loads; the target's layers it shares are the
    run's model)."""
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(get_peft_model_state_dict(drafter.head, save_embedding_layers=False).items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()
