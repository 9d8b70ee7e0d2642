"""Any causal LM sharing the target's tokenizer, used as an EAGLE-2 style tree drafter."""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import DynamicCache, PreTrainedModel

from ..core.attention import check_tree_attention_support, tree_extension_mask
from ..core.drafter_identity import cached_weights_digest
from ..core.features import decoder_layers, unwrap_peft
from ..core.kv_cache import drop_tail
from ..core.modes import check_inference_mode, eval_except
from ..core.transfer import to_device
from ..core.tree import DraftTree
from .base import DraftContext, Drafter
from .static_shapes import StaticShapesMixin


def truncated_causal_lm(target: PreTrainedModel, num_layers: int) -> PreTrainedModel:
    """A causal LM made of the target's first ``num_layers`` layers, final norm and lm_head.

    Weights are shared with the target, not copied. Early-exit drafts of models trained
    without an exit loss are often poor: measure the acceptance before relying on one.
    """
    target = unwrap_peft(target)
    total = target.config.num_hidden_layers
    integer = isinstance(num_layers, int) and not isinstance(num_layers, bool)  # None or "2" failed raw, True as 1
    if not integer or not 1 <= num_layers < total:
        raise ValueError(f"num_layers must be an int in 1..{total - 1} for a {total}-layer target, got {num_layers!r}.")
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = num_layers
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:num_layers]
    with torch.device("meta"):
        drafter = type(target)(config)
    source, dest, layers = target.get_decoder(), drafter.get_decoder(), decoder_layers(target)
    for name, module in source.named_children():
        setattr(dest, name, nn.ModuleList(list(module)[:num_layers]) if module is layers else module)
    drafter.set_output_embeddings(target.get_output_embeddings())
    if len(decoder_layers(drafter)) != num_layers:  # the stack sits deeper than a child of the decoder: not truncated
        raise ValueError(f"Cannot truncate {type(target).__name__}: its layer stack is not a child of its decoder.")
    leftovers = [name for name, p in drafter.named_parameters() if p.is_meta]
    leftovers += [name for name, b in drafter.named_buffers() if b.is_meta]
    if leftovers:
        raise ValueError(f"Cannot truncate {type(target).__name__}: unshared parts {leftovers[:5]}.")
    drafter.generation_config = copy.deepcopy(target.generation_config)
    return eval_except(drafter, [target])  # the shared layers, norm and head stay in the target's mode


def _causal_step(model: PreTrainedModel, input_ids, position_ids, mask, cache, output_rows) -> tuple[torch.Tensor]:
    """Draft log-probs ``[B, vocab]`` (float32) of one fixed-shape step (of the ``output_rows`` alone when given)."""
    logits = model(input_ids=input_ids, position_ids=position_ids, attention_mask=mask, past_key_values=cache,
                   use_cache=True, logits_to_keep=0 if output_rows is None else output_rows).logits
    return (torch.log_softmax(logits[0].float(), dim=-1),)


class CausalLMDrafter(StaticShapesMixin, Drafter):
    """Drafts with a (small) causal LM that uses the target's tokenizer.

    Args:
        model: the draft model; ``sdpa`` or ``eager`` attention.

    Example:
        >>> drafter = CausalLMDrafter.from_target_layers(target, num_layers=4)
        >>> target.generate(**inputs, assistant_model=drafter, assistant_policy=StaticTreePolicy())
    """

    def __init__(self, model: PreTrainedModel):
        if not getattr(model, "can_generate", lambda: False)():
            raise ValueError(
                f"CausalLMDrafter needs a causal LM, whose forward returns logits; got a {type(model).__name__}, which "
                "cannot generate (a bare decoder without its LM head, or a drafter's network): load the draft model "
                "with AutoModelForCausalLM, or pass the drafter that drives the network (Eagle3Drafter, DVIDrafter)."
            )
        if getattr(model.config, "is_encoder_decoder", False):  # it can generate, and fails inside the first draft
            raise ValueError(
                f"CausalLMDrafter needs a decoder-only causal LM; {type(model).__name__} is an encoder-decoder model, "
                "which drafts from an encoder's output, not from the target's tokens: load a decoder-only draft model "
                "with AutoModelForCausalLM."
            )
        check_tree_attention_support(model.config, role="draft model")
        self.model = model  # the caller's: its mode is checked at each call (bind), not switched
        self._cache: DynamicCache | None = None
        self._committed = 0
        self._fed: list[int] = []  # tree nodes in the draft cache, after the committed prefix

    @classmethod
    def from_target_layers(cls, target: PreTrainedModel, num_layers: int) -> CausalLMDrafter:
        """Draft with the target's first ``num_layers`` layers (weights shared)."""
        return cls(truncated_causal_lm(target, num_layers))

    def bind(self, target: PreTrainedModel) -> None:
        check_inference_mode(self.model, role="draft model")
        draft_vocab, target_vocab = self.model.config.vocab_size, unwrap_peft(target).config.vocab_size
        if draft_vocab != target_vocab:
            raise ValueError(
                f"The draft model's vocab_size ({draft_vocab}) differs from the target's ({target_vocab}): a "
                "CausalLMDrafter must use the target's tokenizer and its vocab_size. Models of one tokenizer may "
                "differ in padding alone (e.g. Qwen2.5-0.5B's 151936 rows, Qwen2.5-7B's 152064): then resize the "
                f"drafter's to the target's, draft_model.resize_token_embeddings({target_vocab}) (padding rows hold "
                "no token; verification keeps the output exact). For a drafter with another tokenizer, use "
                "transformers' universal assisted generation (assistant_model= with assistant_tokenizer=, without "
                "assistant_policy)."
            )
        # plain full-length layers: tree nodes stay addressable; the mask applies any sliding window
        self._cache = DynamicCache()
        self._committed = 0
        self._fed = []
        self._reset_static_shapes()

    def weights_digest(self) -> str:
        """The draft model's :func:`~hf_adaptive_spec.core.drafter_identity.weights_digest`."""
        return cached_weights_digest(self.model)

    _static_step = staticmethod(_causal_step)

    def _static_model(self) -> PreTrainedModel:
        return self.model

    @torch.no_grad()
    def begin_tree(self, context: DraftContext) -> torch.Tensor:
        if self._static_in_use:
            return self._begin_static(context)
        new_tokens = context.input_ids[:, self._committed :].to(self.model.device)
        positions = torch.arange(self._committed, context.input_ids.shape[1], device=self.model.device)
        logits = self.model(
            input_ids=new_tokens,
            position_ids=positions[None],
            past_key_values=self._cache,
            use_cache=True,
            logits_to_keep=1,
        ).logits
        self._committed = context.input_ids.shape[1]
        return torch.log_softmax(logits[:, -1].float(), dim=-1)

    def _begin_static(self, context: DraftContext) -> torch.Tensor:
        tokens = context.input_ids[:, self._committed :].to(self.model.device)
        (log_probs,) = self._static_committed_step(tokens, self._committed)
        self._committed = context.input_ids.shape[1]
        return log_probs

    @torch.no_grad()
    def expand(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        log_probs = self._expand_static(tree, nodes) if self._static_in_use else self._expand_dynamic(tree, nodes)
        self._fed = self._fed + nodes
        return log_probs

    def _expand_static(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        return self._static_level_step(tree, self._fed, nodes, self._committed)[0]

    def _expand_dynamic(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        device = self.model.device
        mask, query_positions = tree_extension_mask(
            self.model.config, self._cache, tree, self._fed, nodes, self._committed - 1, self.model.dtype, device
        )
        logits = self.model(
            input_ids=to_device(torch.tensor([[tree.tokens[node] for node in nodes]], device="cpu"), device),
            attention_mask=mask,
            position_ids=query_positions[None],
            past_key_values=self._cache,
            use_cache=True,
        ).logits
        return torch.log_softmax(logits[0].float(), dim=-1)

    def end_tree(self) -> None:
        if not self._static_in_use:  # static slots past the committed prefix are simply overwritten
            drop_tail(self._cache, len(self._fed))
        self._fed = []
