"""How the engine runs the target model: the prefill, one verification forward per draft tree, and
keeping the accepted path in the cache.

Two implementations behind one small interface:

- :class:`DynamicTarget` grows a :class:`~transformers.DynamicCache` by each tree and crops it back to
  the accepted path. Hidden-state features come from forward hooks; on CPU the lm_head runs lazily,
  only on the nodes the acceptance walk visits; cache-sharing drafters (DVI) verify through their
  :class:`~hf_adaptive_spec.drafters.base.SharedCacheVerification` (:class:`SharedCacheTarget`).
- :class:`StaticTarget` writes each tree into a fixed-size :class:`~transformers.StaticCache` right
  after the committed prefix, padded to one of a few bucket sizes, so that every verification forward
  has one of a few static shapes. The forward (optionally ``torch.compile``'d, one graph per bucket,
  kept on the model across calls: :class:`~hf_adaptive_spec.generation.static_path.FastPath`) returns the logits of
  every row and the hidden states the drafter and policy read, as outputs rather than through hooks.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod

import torch
from transformers import GenerationConfig, PreTrainedModel

from ..core.attention import mask_kinds, tree_attention_mask
from ..core.features import FeatureCapture, decoder_layers
from ..core.kv_cache import compact_cache
from ..core.output_head import OutputHead, TopLogitsRescorer
from ..core.static_cache import check_static_cache, compact_static_cache, set_cache_length, windowed_static_tree_masks
from ..core.transfer import to_device
from ..core.tree import DraftTree
from ..drafters.base import Drafter, SharedCacheVerification
from .static_path import FastPath, compile_options, fast_path


class TreeLogits:
    """Target logits per tree node, ``[vocab]`` float32 rows.

    ``hidden`` (the final-norm output ``[n, hidden]``) serves two purposes: without ``logits`` the
    lm_head runs only for the nodes the acceptance walk visits (about τ of them), not for every
    verified token; with a ``rescorer`` (half-precision models) each visited row's top tokens are
    recomputed in float32 from it (:class:`~hf_adaptive_spec.core.TopLogitsRescorer`).

    ``tokens`` are the tree's tokens on the model's device (the verification's input ids), when
    the target has them, ``[1, n]`` or longer: logits processors see the path's tokens without another upload.
    """

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        hidden: torch.Tensor | None = None,
        head: OutputHead | None = None,
        rescorer: TopLogitsRescorer | None = None,
        tokens: torch.Tensor | None = None,
    ):
        self.logits, self.hidden, self.head, self.rescorer, self.tokens = logits, hidden, head, rescorer, tokens
        self.rows: dict[int, torch.Tensor] = {}

    def __getitem__(self, node: int) -> torch.Tensor:
        if node not in self.rows:
            row = self.logits[node] if self.logits is not None else self.head(self.hidden[node : node + 1])[0]
            self.rows[node] = self.rescorer(row, self.hidden[node]) if self.rescorer is not None else row.float()
        return self.rows[node]

    def argmaxes(self) -> list[int | None] | None:
        """Every row's argmax (of the rescored row, as ``self[node].argmax()``) in one read; None where the greedy
        walk should read the rows it visits one by one, and None for a row the rescorer's candidates do not settle.

        On an accelerator each read is a synchronisation, and a walk that reads each visited row's argmax (and the
        rescorer's ``nonzero``) waits for the device about twice per node: this reads once per tree. On the CPU a
        read waits for nothing, and the few rows a walk visits cost less than all of them (SmolLM2's bfloat16 rows,
        16 nodes: 0.39 ms for three visited rows against 0.77 ms for all 16 on two AVX-512 bfloat16 EPYC cores)."""
        if self.logits is None or not reads_rows_at_once(self.logits.device):
            return None
        if self.rescorer is None:
            return self.logits.argmax(dim=-1).tolist()
        choices, settled = self.rescorer.argmaxes(self.logits, self.hidden).tolist()
        return [choice if ok else None for choice, ok in zip(choices, settled)]


def reads_rows_at_once(device: torch.device) -> bool:
    """Whether the acceptance walk reads every row's argmax at once on ``device`` (see :meth:`TreeLogits.argmaxes`)."""
    return device.type != "cpu"


Features = dict[int, torch.Tensor]
"""Hidden states by ``hidden_states`` index, each ``[1, tokens, hidden]``."""


class TargetForward(ABC):
    """The target side of one ``generate`` call. Use as a context manager around the decoding loop."""

    #: whether verification runs a compiled graph (reported in ``out.speculation``).
    compiled: bool = False
    #: whether the compiled verification forwards are ahead-of-time packages (see FastPath).
    packaged: bool = False
    #: seconds this call spent compiling graphs (first use of a bucket), apart from verification time.
    compile_time: float = 0.0
    #: the cache a cache-sharing drafter drafts in (``DraftContext.target_cache``); None for the others.
    draft_cache = None
    #: entries the caller's cache held before this call (continuing an earlier generation, as stock ``generate``
    #: does): the prompt's first ``cached_length`` tokens; the prefill runs the tokens after them.
    cached_length: int = 0
    #: whether :attr:`cache` is the engine's own (the model's StaticCache, which the next call resets), not the caller's
    own_cache: bool = False

    def __enter__(self) -> TargetForward:
        return self

    def __exit__(self, *exc) -> None:
        return None

    @abstractmethod
    def prefill(self, input_ids: torch.LongTensor, model_kwargs: dict) -> tuple[TreeLogits, Features]:
        """Run the prompt after its first :attr:`cached_length` tokens; return the logits of its last position
        (one row) and the features of the tokens it ran."""

    @abstractmethod
    def verify(self, tree: DraftTree, past_length: int) -> TreeLogits:
        """One forward over every node of ``tree`` after ``past_length`` committed cache entries."""

    @abstractmethod
    def commit(self, tree: DraftTree, past_length: int, keep: torch.Tensor, in_place: int = 0) -> Features:
        """Keep the tree nodes ``keep`` (root first) in the cache; return their features. The first ``in_place`` of
        them are already in their slots (:func:`~hf_adaptive_spec.core.tree.nodes_in_place`): not moved."""

    def cache_for_caller(self):
        """The cache ``out.past_key_values`` returns: the one this call decoded in."""
        return self.cache


def lm_head_is_last_step(model: PreTrainedModel, final_hidden: torch.Tensor, logits: torch.Tensor) -> bool:
    """Whether the model's logits are exactly ``lm_head(final-norm output)`` (no softcapping,
    scaling, ...), checked on the prefill's last position: then verification can skip the head."""
    head = model.get_output_embeddings()
    if head is None:
        return False
    with torch.no_grad():
        recomputed = head(final_hidden[None])[0].float()
    tolerance = max(1e-4, 2 * torch.finfo(logits.dtype).eps)  # half precision: a rounding step
    return torch.allclose(recomputed, logits.float(), rtol=tolerance, atol=tolerance)


def _rescorer(model: PreTrainedModel) -> TopLogitsRescorer | None:
    """Float32 rescoring of the top logits for a half-precision model with a plain linear head."""
    head = model.get_output_embeddings()
    return TopLogitsRescorer(head, model.dtype) if TopLogitsRescorer.applies(head, model.dtype) else None


class DynamicTarget(TargetForward):
    """Verification on a growing :class:`~transformers.DynamicCache` (the eager engine)."""

    def __init__(self, model: PreTrainedModel, cache, wanted: set[int], cached_length: int = 0):
        self.model, self.cache, self.wanted, self.cached_length = model, cache, wanted, cached_length
        self.final_index = len(decoder_layers(model))
        self.capture = FeatureCapture(model, wanted | {self.final_index})
        self.head: OutputHead | None = None  # set when the logits are lm_head(final norm)
        self.lazy_head: OutputHead | None = None
        self.rescorer: TopLogitsRescorer | None = None
        self._tree_features: Features = {}

    def __enter__(self) -> DynamicTarget:
        self.capture.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.capture.__exit__(*exc)

    def prefill(self, input_ids: torch.LongTensor, model_kwargs: dict) -> tuple[TreeLogits, Features]:
        model = self.model
        # outputs generate drops without return_dict_in_generate (and refused with it): not computed
        kwargs = {k: v for k, v in model_kwargs.items() if k not in ("output_attentions", "output_hidden_states")}
        new_tokens = input_ids.shape[1] - self.cached_length
        inputs = model.prepare_inputs_for_generation(input_ids, next_sequence_length=new_tokens, **kwargs)
        self.capture.latest.clear()  # a forward that ran without the hooks is refused, never served the last one's
        logits = model(**inputs, return_dict=True).logits
        final_hidden = self.capture.read(self.final_index)[0]
        if lm_head_is_last_step(model, final_hidden[-1], logits[0, -1]):
            self.head = OutputHead(model.get_output_embeddings())
            # a CPU choice: ~τ serial row products beat the head over every node; a GPU computes them all at once
            self.lazy_head = None if reads_rows_at_once(model.device) else self.head
            self.rescorer = _rescorer(model)
        first = TreeLogits(logits=logits[0, -1:], hidden=final_hidden[-1:], rescorer=self.rescorer)
        return first, {i: self.capture.read(i) for i in self.wanted}

    def verify(self, tree: DraftTree, past_length: int) -> TreeLogits:
        self.capture.latest.clear()
        tree_logits = verify_tree(self.model, self.cache, tree, past_length, self.lazy_head)
        self._keep_tree_features()
        if self.rescorer is not None:
            tree_logits.rescorer = self.rescorer
            if tree_logits.hidden is None:
                tree_logits.hidden = self.capture.read(self.final_index)[0]
        return tree_logits

    def _keep_tree_features(self) -> None:
        """The verification forward's features, kept for :meth:`commit`: a logits processor that runs the model
        itself (``guidance_scale``'s) overwrites the capture in between."""
        self._tree_features = {i: self.capture.read(i) for i in self.wanted}

    def commit(self, tree: DraftTree, past_length: int, keep: torch.Tensor, in_place: int = 0) -> Features:
        compact_cache(self.cache, len(tree), keep, in_place=in_place)
        return {i: feature[:, keep] for i, feature in self._tree_features.items()}


class SharedCacheTarget(DynamicTarget):
    """Verification through a self-speculative drafter's :class:`SharedCacheVerification`: the
    drafter wrote the draft nodes' K/V into the first ``sharing.layers`` layers of this cache, and
    verification reuses them, then applies the final norm's output to ``lm_head``."""

    def __init__(self, model: PreTrainedModel, cache, wanted: set[int], sharing: SharedCacheVerification,
                 cached_length: int = 0):
        super().__init__(model, cache, wanted, cached_length)
        self.sharing = sharing

    @property
    def draft_cache(self):
        """The drafter drafts in the engine's cache itself."""
        return self.cache

    def prefill(self, input_ids: torch.LongTensor, model_kwargs: dict) -> tuple[TreeLogits, Features]:
        first, features = super().prefill(input_ids, model_kwargs)
        if self.head is None:
            raise ValueError(
                "A cache-sharing drafter verifies through the target's final norm and lm_head, but this model's logits "
                f"are not lm_head(final norm) (softcapping or scaling): {self.sharing.how_to_disable}."
            )
        return first, features

    def verify(self, tree: DraftTree, past_length: int) -> TreeLogits:
        hidden = self.sharing.verify(self.model, self.cache, tree, past_length)
        self._keep_tree_features()
        logits = None if self.lazy_head is not None else self.head(hidden)
        return TreeLogits(logits=logits, hidden=hidden, head=self.lazy_head, rescorer=self.rescorer)


def check_cache_sharing(drafter: Drafter, wanted: set[int], lookup_tokens: int, static: bool) -> None:
    """Refuse what a cache-sharing drafter's verification cannot serve, naming the way out. On the
    static path the drafter drafts in its own cache instead, unless it requires sharing."""
    sharing, name = drafter.cache_sharing, type(drafter).__name__
    if static:
        if sharing.required:
            raise ValueError(
                f"{name} was asked to share the target's KV cache (its first {sharing.layers} layers), which the "
                "static-cache path cannot do: leave cache sharing at its default (the drafter then drafts in a static "
                "cache of its own on this path), or drop cache_implementation='static' / the StaticCache."
            )
        return
    if lookup_tokens:
        raise ValueError(
            f"{name} verifies through its own cache of the draft nodes, which has no entries for prompt-lookup nodes: "
            f"drop prompt_lookup_num_tokens, or {sharing.how_to_disable}."
        )
    shallow = sorted(i for i in wanted if i < sharing.layers)
    if shallow:
        raise ValueError(
            f"{name} shares the target's first {sharing.layers} layers, whose hidden states are not computed for every "
            f"tree node; features {shallow} cannot be served. Ask for hidden-state indices >= the shared layers, or "
            f"{sharing.how_to_disable}."
        )


def verify_tree(
    model: PreTrainedModel, cache, tree: DraftTree, past_length: int, lazy_head: OutputHead | None
) -> TreeLogits:
    """One target forward over the whole tree (its rows are appended to ``cache``); with ``lazy_head``
    the decoder only, the head running later on the nodes the acceptance walk visits."""
    device = model.device
    # copies that do not wait for the device's queued work (fresh pageable tensors, staged before the call returns)
    positions = past_length + to_device(torch.tensor(tree.depths, device="cpu"), device)
    visible = to_device(tree.ancestor_mask(), device)
    mask = tree_attention_mask(model.config, cache, positions, positions, visible, model.dtype)
    tokens = to_device(torch.tensor([tree.tokens], device="cpu"), device)
    inputs = dict(input_ids=tokens, attention_mask=mask, position_ids=positions[None], past_key_values=cache,
                  use_cache=True)
    if lazy_head is not None:
        return TreeLogits(hidden=model.get_decoder()(**inputs).last_hidden_state[0], head=lazy_head, tokens=tokens)
    return TreeLogits(logits=model(**inputs).logits[0], tokens=tokens)


class StaticTarget(TargetForward):
    """Verification of padded trees in a fixed-size static cache (see the module docstring)."""

    def __init__(
        self, model: PreTrainedModel, cache, wanted: set[int], path: FastPath, options: dict | None,
        own_cache: bool = False, packaged: bool | None = None, cached_length: int = 0,
    ):
        self.model, self.cache, self.path, self.options = model, cache, path, options
        # whether this call verifies from packages, decided once at its start (FastPath.begin_call)
        self._from_packages = path.packages(options) if packaged is None else packaged
        self.own_cache = own_cache  # the model's own cache (FastPath.cache_for), which later calls reuse
        self.cached_length = cached_length
        self.wanted = tuple(sorted(wanted))
        self.rescorer = _rescorer(model)
        self.final_index = len(decoder_layers(model))
        # the forward's hidden-state outputs: the features, and the final norm's output for rescoring
        self.feature_layers = tuple(sorted(wanted | ({self.final_index} if self.rescorer is not None else set())))
        self.compiled = options is not None
        self.max_cache_len = cache.layers[0].max_cache_len
        self.mask_kinds = mask_kinds(model.config)  # one verification mask per attention kind
        self._features: Features = {}

    @property
    def packaged(self) -> bool:
        return self._from_packages and not self.path.packages_failed  # unless building failed this call

    def prefill(self, input_ids: torch.LongTensor, model_kwargs: dict) -> tuple[TreeLogits, Features]:
        set_cache_length(self.cache, self.cached_length)
        positions = torch.arange(self.cached_length, input_ids.shape[1], device=self.model.device)[None]
        out = self.model(
            input_ids=input_ids[:, self.cached_length :].to(self.model.device),
            position_ids=positions,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1,
            output_hidden_states=list(self.feature_layers) if self.feature_layers else False,
        )
        logits, hidden = out.logits[0, -1:], None
        if self.rescorer is not None:
            hidden = out.hidden_states[self.final_index][0, -1:]
            if not lm_head_is_last_step(self.model, hidden[0], logits[0]):
                self.rescorer = None  # softcapped or scaled logits: no float32 products to recover
        features = {i: out.hidden_states[i] for i in self.wanted}
        return TreeLogits(logits=logits, hidden=hidden, rescorer=self.rescorer), features

    def verify(self, tree: DraftTree, past_length: int) -> TreeLogits:
        device, n = self.model.device, len(tree)
        bucket = self.path.bucket_for(n)
        padding = bucket - n
        input_ids = torch.tensor([tree.tokens + [tree.tokens[0]] * padding], device="cpu")
        positions = torch.tensor([[past_length + depth for depth in tree.depths] + [past_length] * padding],
                                 device="cpu")
        mask = windowed_static_tree_masks(self.mask_kinds, tree.ancestor_mask(), positions[0], past_length, bucket,
                                          self.max_cache_len, self.model.dtype, device)
        set_cache_length(self.cache, past_length)
        input_ids = to_device(input_ids, device)
        (logits, features), compile_seconds = self.path.forward(
            self.options,
            input_ids,
            to_device(positions, device),
            mask,
            self.cache,
            self.feature_layers,
            packaged=self._from_packages,
        )
        self.compile_time += compile_seconds
        outputs = dict(zip(self.feature_layers, features))
        self._features = {i: outputs[i] for i in self.wanted}
        hidden = outputs[self.final_index][0, :n] if self.rescorer is not None else None
        return TreeLogits(logits=logits[0, :n], hidden=hidden, rescorer=self.rescorer, tokens=input_ids)

    def commit(self, tree: DraftTree, past_length: int, keep: torch.Tensor, in_place: int = 0) -> Features:
        compact_static_cache(self.cache, past_length, keep, in_place)
        # a gather (a copy) even for nodes in place: the features are outputs of a compiled graph, whose next replay
        # may overwrite them (CUDA graphs), and the drafter reads them after the next verification
        return {i: feature[:, keep] for i, feature in self._features.items()}

    def cache_for_caller(self):
        """The caller's cache, or a copy of the engine's own: the next call of the same size decodes in
        that one again (stock ``generate`` returns a cache of each call's own)."""
        return copy.deepcopy(self.cache) if self.own_cache else self.cache


def static_target(
    model: PreTrainedModel, cache, own_cache: bool, wanted: set[int], model_kwargs: dict, config: GenerationConfig,
    cached_length: int,
) -> StaticTarget:
    """A :class:`StaticTarget` on ``cache`` (``own_cache``: the model's fixed-size cache), checked for this call,
    which continues after the ``cached_length`` tokens the cache holds."""
    path = fast_path(model)
    check_static_cache(cache, path.needed_slots(config.max_length), model)
    options = compile_options(model, {**model_kwargs, "past_key_values": cache}, config)
    packaged = path.begin_call(options)
    return StaticTarget(
        model, cache, wanted, path, options, own_cache=own_cache, packaged=packaged, cached_length=cached_length
    )
