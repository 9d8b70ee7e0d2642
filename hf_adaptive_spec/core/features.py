"""Capture selected target hidden states during a forward, without ``output_hidden_states=True``."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable

import torch
from torch import nn
from transformers import PreTrainedModel


def unwrap_peft(model: nn.Module) -> PreTrainedModel:
    """The transformers model inside a peft wrapper (the model itself when unwrapped)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


#: where decoders keep their layer stack: Llama-like ``layers``, GPT-2, GPT-J and Falcon ``h``
_LAYER_STACK_NAMES = ("layers", "h")
#: where decoders keep their final norm: Llama-like ``norm``, Phi ``final_layernorm``, OPT and GPT-NeoX
#: ``final_layer_norm``, GPT-2, GPT-J and Falcon ``ln_f``
_FINAL_NORM_NAMES = ("norm", "final_layernorm", "final_layer_norm", "ln_f")
_SUPPORTED_LAYOUTS = "Llama, Mistral, Qwen, Gemma, Phi, OPT, GPT-NeoX, GPT-2"


def decoder_layers(model: PreTrainedModel) -> nn.ModuleList:
    """The decoder layer stack of a causal LM (``model.model.layers`` for Llama-like models)."""
    return _decoder_part(model, _LAYER_STACK_NAMES, nn.ModuleList, "decoder layers")


def final_norm(model: PreTrainedModel) -> nn.Module:
    """The norm a causal LM applies after its last decoder layer (its output is hidden state ``L``)."""
    return _decoder_part(model, _FINAL_NORM_NAMES, nn.Module, "final norm")


def _decoder_part(model: PreTrainedModel, names: tuple[str, ...], kind: type, what: str) -> nn.Module:
    """The first of the decoder's attributes ``names`` that is a ``kind``; an error naming them when none is."""
    decoder = model.get_decoder()
    for name in names:
        module = getattr(decoder, name, None)
        if isinstance(module, kind):
            return module
    raise ValueError(
        f"Cannot find the {what} of {type(model).__name__} (expected one of {list(names)} on its decoder), which the "
        f"engine reads: use a target of a supported layout ({_SUPPORTED_LAYOUTS}), or drop assistant_policy for stock "
        "generate."
    )


#: set on the forward hooks :class:`FeatureCapture` registers: they read hidden states and change nothing
#: (:func:`~hf_adaptive_spec.core.packaged.forward_changes` does not count them)
CAPTURE_HOOK = "_hf_adaptive_spec_capture"


class FeatureCapture:
    """Records hidden states in transformers' ``hidden_states`` numbering while active.

    Index ``i < L`` is the input of decoder layer ``i`` (index 0: the embeddings); index ``L``
    is the output of the final norm. Each forward's captures replace the previous ones.

    Use as a context manager; :attr:`latest` maps index -> ``[batch, seq, hidden]``. Only forwards
    run by the thread that entered it are recorded, so concurrent calls on one model each see their own.
    """

    def __init__(self, model: PreTrainedModel, indices: Iterable[int]):
        self.indices = tuple(sorted(set(indices)))
        self.latest: dict[int, torch.Tensor] = {}
        self._model = model
        self._handles: list = []
        num_layers = len(decoder_layers(model)) if self.indices else 0
        for index in self.indices:
            if not 0 <= index <= num_layers:
                raise ValueError(
                    f"Hidden-state index {index} is out of range for a {num_layers}-layer model (0..{num_layers})."
                )

    def read(self, index: int) -> torch.Tensor:
        """The latest forward's hidden state ``index``, refused with the cause when that forward ran without this
        capture's hooks (clear :attr:`latest` before it, so an earlier forward's states are not read instead)."""
        try:
            return self.latest[index]
        except KeyError:
            raise RuntimeError(
                f"The model's forward ran without hf_adaptive_spec's hooks (hidden state {index} was not captured), "
                "which read the hidden states drafting and verification need. A forward compiled before this call "
                "(torch.compile(model.forward), model.compile()) keeps the hooks it was traced with: dynamo does not "
                "check hooks added since. Call torch._dynamo.reset() before generate so the forward is traced again "
                "with them, or leave the forward uncompiled and decode on the engine's compiled path "
                "(cache_implementation='static' with a compile_config)."
            ) from None

    def __enter__(self) -> FeatureCapture:
        self._thread = threading.get_ident()
        if not self.indices:
            return self
        layers = decoder_layers(self._model)
        for index in self.indices:
            if index < len(layers):
                self._handles.append(layers[index].register_forward_pre_hook(self._pre_hook(index), with_kwargs=True))
            else:
                self._handles.append(final_norm(self._model).register_forward_hook(self._post_hook(index)))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _is_own_forward(self) -> bool:
        """Whether the running forward is this capture's: another thread's forward of the same model is not."""
        return threading.get_ident() == self._thread

    @staticmethod
    def _marked(hook):
        setattr(hook, CAPTURE_HOOK, True)  # it only reads: a package traced without it computes the same
        return hook

    def _pre_hook(self, index: int):
        # ``kwargs`` is optional: torch snapshots a module's hooks, then asks whether each was
        # registered with kwargs. A hook another thread removes in between is called as
        # ``hook(module, args)``; it is never this thread's, so it only has to return quietly.
        def hook(module, args, kwargs=None):
            if self._is_own_forward():
                hidden = args[0] if args else kwargs["hidden_states"]
                self.latest[index] = hidden.detach()

        return self._marked(hook)

    def _post_hook(self, index: int):
        def hook(module, args, output):
            if self._is_own_forward():
                self.latest[index] = output.detach()

        return self._marked(hook)


# EAGLE-3's fused feature layers: defined here because drafters (EAGLE-3) and policies (Re-SpS's
# observation) both read them.
def default_aux_layer_ids(num_target_layers: int) -> list[int]:
    """EAGLE-3's target layers ``[2, L//2, L-3]`` as inputs of those layers (``hidden_states`` indices).

    The same default in the EAGLE reference, vLLM and SGLang, for targets of 7 layers or more. Below
    that those ids repeat or leave ``1..L-1``; targets of 4 to 6 layers take ``[1, L//2, L-1]``
    instead (exports always write the ids, so no engine falls back to its own default).
    """
    eagle3 = [2, num_target_layers // 2, num_target_layers - 3]
    if not aux_layer_ids_problem(eagle3, num_target_layers):
        return eagle3
    return [1, num_target_layers // 2, num_target_layers - 1]


def aux_layer_ids_problem(ids: list[int], num_target_layers: int | None) -> str | None:
    """Why ``ids`` cannot be EAGLE-3's fused features (None if they can): vLLM and SGLang capture
    them in ascending layer order, once each, at the input of layers ``1..L-1`` (layer 0 has no
    residual yet; ``L`` is never captured), so they must be strictly increasing within that range."""
    if any(later <= earlier for earlier, later in itertools.pairwise(ids)):
        return "must be strictly increasing (serving engines capture them in ascending order, once each)"
    if num_target_layers is not None and not all(1 <= i <= num_target_layers - 1 for i in ids):
        return (
            f"must lie in 1..{num_target_layers - 1} for a {num_target_layers}-layer target (0 is the embeddings, "
            f"which have no residual to capture; {num_target_layers} is never captured)"
        )
    return None
