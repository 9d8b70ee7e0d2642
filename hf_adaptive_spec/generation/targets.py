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
  kept on the model across calls: :class:`FastPath`) returns the logits of every row and the hidden
  states the drafter and policy read, as outputs rather than through hooks.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from abc import ABC, abstractmethod
from pathlib import Path

import torch
from transformers import CompileConfig, GenerationConfig, PreTrainedModel, StaticCache

from ..core.attention import tree_attention_mask
from ..core.compiled import CompiledForward, split_inductor_patches
from ..core.features import FeatureCapture, decoder_layers
from ..core.kv_cache import compact_cache
from ..core.output_head import OutputHead, TopLogitsRescorer
from ..core.packaged import (
    PackageBuildError,
    PackagedForward,
    default_package_dir,
    weight_sharing_twin,
    weights_digest,
)
from ..core.static_cache import (
    check_static_cache,
    compact_static_cache,
    set_cache_length,
    static_cache_holding,
    static_cache_tensors,
    static_tree_mask,
)
from ..core.tree import DraftTree
from ..drafters.base import Drafter, SharedCacheVerification

#: verification forwards are padded to the smallest of these that fits the tree (see FastPath). On the
#: compiled bfloat16 path of a 2-core AMD EPYC a forward over 8 tokens costs what one costs and 12 about
#: 1.2x; with a tree of 8 and the prompt-lookup chain, (8, 12, 16, 32) ran 10% faster than (8, 16, 32)
#: (MT-bench, results/README.md). Graphs compile on a bucket's first use.
DEFAULT_BUCKETS = (8, 12, 16, 32)


class TreeLogits:
    """Target logits per tree node, ``[vocab]`` float32 rows.

    ``hidden`` (the final-norm output ``[n, hidden]``) serves two purposes: without ``logits`` the
    lm_head runs only for the nodes the acceptance walk visits (about τ of them), not for every
    verified token; with a ``rescorer`` (half-precision models) each visited row's top tokens are
    recomputed in float32 from it (:class:`~hf_adaptive_spec.core.TopLogitsRescorer`).
    """

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        hidden: torch.Tensor | None = None,
        head: OutputHead | None = None,
        rescorer: TopLogitsRescorer | None = None,
    ):
        self.logits, self.hidden, self.head, self.rescorer = logits, hidden, head, rescorer
        self.rows: dict[int, torch.Tensor] = {}

    def __getitem__(self, node: int) -> torch.Tensor:
        if node not in self.rows:
            row = self.logits[node] if self.logits is not None else self.head(self.hidden[node : node + 1])[0]
            self.rows[node] = self.rescorer(row, self.hidden[node]) if self.rescorer is not None else row.float()
        return self.rows[node]


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

    def __enter__(self) -> TargetForward:
        return self

    def __exit__(self, *exc) -> None:
        return None

    @abstractmethod
    def prefill(self, input_ids: torch.LongTensor, model_kwargs: dict) -> tuple[TreeLogits, Features]:
        """Run the prompt; return the logits of its last position (one row) and the prompt's features."""

    @abstractmethod
    def verify(self, tree: DraftTree, past_length: int) -> TreeLogits:
        """One forward over every node of ``tree`` after ``past_length`` committed cache entries."""

    @abstractmethod
    def commit(self, tree: DraftTree, past_length: int, keep: torch.Tensor) -> Features:
        """Keep the tree nodes ``keep`` (root first) in the cache; return their features."""


def _lm_head_is_last_step(model: PreTrainedModel, final_hidden: torch.Tensor, logits: torch.Tensor) -> bool:
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

    def __init__(self, model: PreTrainedModel, cache, wanted: set[int]):
        self.model, self.cache, self.wanted = model, cache, wanted
        self.final_index = len(decoder_layers(model))
        self.capture = FeatureCapture(model, wanted | {self.final_index})
        self.head: OutputHead | None = None  # set when the logits are lm_head(final norm)
        self.lazy_head: OutputHead | None = None
        self.rescorer: TopLogitsRescorer | None = None

    def __enter__(self) -> DynamicTarget:
        self.capture.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.capture.__exit__(*exc)

    def prefill(self, input_ids: torch.LongTensor, model_kwargs: dict) -> tuple[TreeLogits, Features]:
        model = self.model
        logits = model(**model.prepare_inputs_for_generation(input_ids, **model_kwargs), return_dict=True).logits
        final_hidden = self.capture.latest[self.final_index][0]
        if _lm_head_is_last_step(model, final_hidden[-1], logits[0, -1]):
            self.head = OutputHead(model.get_output_embeddings())
            # a CPU choice: ~τ serial row products beat the head over every node; a GPU computes them all at once
            self.lazy_head = self.head if model.device.type == "cpu" else None
            self.rescorer = _rescorer(model)
        first = TreeLogits(logits=logits[0, -1:], hidden=final_hidden[-1:], rescorer=self.rescorer)
        return first, {i: self.capture.latest[i] for i in self.wanted}

    def verify(self, tree: DraftTree, past_length: int) -> TreeLogits:
        tree_logits = verify_tree(self.model, self.cache, tree, past_length, self.lazy_head)
        if self.rescorer is not None:
            tree_logits.rescorer = self.rescorer
            if tree_logits.hidden is None:
                tree_logits.hidden = self.capture.latest[self.final_index][0]
        return tree_logits

    def commit(self, tree: DraftTree, past_length: int, keep: torch.Tensor) -> Features:
        compact_cache(self.cache, len(tree), keep)
        return {i: self.capture.latest[i][:, keep] for i in self.wanted}


class SharedCacheTarget(DynamicTarget):
    """Verification through a self-speculative drafter's :class:`SharedCacheVerification`: the
    drafter wrote the draft nodes' K/V into the first ``sharing.layers`` layers of this cache, and
    verification reuses them, then applies the final norm's output to ``lm_head``."""

    def __init__(self, model: PreTrainedModel, cache, wanted: set[int], sharing: SharedCacheVerification):
        super().__init__(model, cache, wanted)
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
                "are not lm_head(final norm) (softcapping or scaling): disable the drafter's cache sharing."
            )
        return first, features

    def verify(self, tree: DraftTree, past_length: int) -> TreeLogits:
        hidden = self.sharing.verify(self.model, self.cache, tree, past_length)
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
            "drop prompt_lookup_num_tokens, or disable the drafter's cache sharing."
        )
    shallow = sorted(i for i in wanted if i < sharing.layers)
    if shallow:
        raise ValueError(
            f"{name} shares the target's first {sharing.layers} layers, whose hidden states are not computed for every "
            f"tree node; features {shallow} cannot be served. Ask for hidden-state indices >= the shared layers, or "
            "disable the drafter's cache sharing."
        )


def verify_tree(model: PreTrainedModel, cache, tree: DraftTree, past_length: int, lazy_head: OutputHead | None) -> TreeLogits:
    """One target forward over the whole tree (its rows are appended to ``cache``); with ``lazy_head``
    the decoder only, the head running later on the nodes the acceptance walk visits."""
    device = model.device
    positions = past_length + torch.tensor(tree.depths, device=device)
    mask = tree_attention_mask(model.config, cache, positions, positions, tree.ancestor_mask().to(device), model.dtype)
    inputs = dict(
        input_ids=torch.tensor([tree.tokens], device=device),
        attention_mask=mask,
        position_ids=positions[None],
        past_key_values=cache,
        use_cache=True,
    )
    if lazy_head is not None:
        return TreeLogits(hidden=model.get_decoder()(**inputs).last_hidden_state[0], head=lazy_head)
    return TreeLogits(logits=model(**inputs).logits[0])


def _forward_with_features(model: PreTrainedModel, input_ids, position_ids, attention_mask, cache, feature_layers):
    """The target forward whose outputs are the logits of every row and the selected hidden states."""
    out = model(
        input_ids=input_ids,
        position_ids=position_ids,
        attention_mask=attention_mask,
        past_key_values=cache,
        use_cache=True,
        output_hidden_states=list(feature_layers) if feature_layers else False,
    )
    return out.logits, tuple(out.hidden_states[i] for i in feature_layers)


class _ForwardWithCacheInputs(torch.nn.Module):
    """:func:`_forward_with_features` with the static cache's tensors as inputs and a flat tuple of
    outputs ``(logits, *features)``: the form ``torch.export`` traces into a package."""

    def __init__(self, model: PreTrainedModel, cache, feature_layers: tuple[int, ...]):
        super().__init__()
        self.model, self.cache, self.feature_layers = model, cache, feature_layers

    def forward(self, input_ids, position_ids, attention_mask, *cache_tensors):
        with static_cache_holding(self.cache, cache_tensors):
            logits, features = _forward_with_features(
                self.model, input_ids, position_ids, attention_mask, self.cache, self.feature_layers
            )
        return (logits, *features)


#: ``FastPath(package_dir=...)``'s default: ahead-of-time packages in
#: :func:`~hf_adaptive_spec.core.packaged.default_package_dir` where they apply.
DEFAULT_PACKAGE_DIR = "default"


class FastPath:
    """What a model keeps across ``generate`` calls for static-shape verification: its bucket sizes,
    the compiled forward (one graph per bucket and feature set, built on first use) and, when the
    caller passes no cache, a fixed-size :class:`~transformers.StaticCache` of its own.

    The engine's cache is reused while it is large enough and replaced by a larger one (rounded up
    to ``cache_granularity`` slots) when a call needs more; a new size means new graphs, so pass a
    ``StaticCache`` of your own, or use short prompts first, to keep one set.

    On a CPU with inductor's weight freezing (:func:`fast_path_compile_config`), inductor's on-disk
    caches cannot keep frozen graphs, so each new process would compile every bucket again (about
    30 s each for SmolLM2). There the verification forward is compiled ahead of time instead, one
    AOTInductor package per bucket and cache length (about 330 MB for SmolLM2 in bfloat16) kept in ``package_dir``
    (default ``$HF_ADAPTIVE_SPEC_PACKAGES`` or ``~/.cache/hf_adaptive_spec/packages``); later
    processes load them in about a second (see :mod:`~hf_adaptive_spec.core.packaged`).
    ``package_dir=None`` compiles in-process every time.
    """

    cache_granularity = 512

    def __init__(self, model: PreTrainedModel, buckets: tuple[int, ...] = DEFAULT_BUCKETS,
                 package_dir: str | os.PathLike | None = DEFAULT_PACKAGE_DIR):
        if not buckets or any(b < 1 for b in buckets) or list(buckets) != sorted(set(buckets)):
            raise ValueError(f"Verification buckets must be distinct positive sizes in ascending order, got {buckets}.")
        self.model, self.buckets = model, tuple(buckets)
        self.package_dir = _resolve_package_dir(package_dir)
        self.own_cache: StaticCache | None = None
        self._compiled: CompiledForward | None = None
        self._packaged: PackagedForward | None = None
        self._lock = threading.Lock()

    @property
    def largest_bucket(self) -> int:
        return self.buckets[-1]

    def bucket_for(self, num_tokens: int) -> int:
        for bucket in self.buckets:
            if num_tokens <= bucket:
                return bucket
        raise ValueError(f"A tree of {num_tokens} nodes exceeds the largest verification bucket {self.largest_bucket}.")

    def cache_for(self, needed_length: int) -> StaticCache:
        """The engine's own static cache, at least ``needed_length`` slots long."""
        with self._lock:
            current = self.own_cache
            fits = current is not None and current.layers and current.layers[0].max_cache_len >= needed_length
            if not fits:
                size = -(-needed_length // self.cache_granularity) * self.cache_granularity
                self.own_cache = StaticCache(config=self.model.config, max_cache_len=size)
            return self.own_cache

    def packages(self, compile_options: dict | None) -> bool:
        """Whether forwards compiled with ``compile_options`` run as ahead-of-time packages: a CPU
        model, inductor's weight freezing, no CUDA-graph mode, and a ``package_dir``."""
        if compile_options is None or self.package_dir is None or self.model.device.type != "cpu":
            return False
        inductor_options = split_inductor_patches(compile_options)[1]
        return bool(inductor_options.get("freezing")) and compile_options.get("mode") in (None, "default")

    def forward(self, compile_options: dict | None, input_ids, position_ids, attention_mask, cache, feature_layers):
        """``((logits, features), seconds compiling)`` of one padded forward, compiled with
        ``compile_options`` (None: eager)."""
        args = (self.model, input_ids, position_ids, attention_mask, cache, feature_layers)
        if compile_options is None:
            return _forward_with_features(*args), 0.0
        if self.packages(compile_options):
            try:
                return self._packaged_forward(compile_options, input_ids, position_ids, attention_mask, cache,
                                              feature_layers)
            except PackageBuildError as error:  # this model does not export: compile it in-process, with a word
                warnings.warn(f"{error} Compiling in-process instead (out.speculation.packaged is False).", stacklevel=2)
                self.package_dir = None
        if self._compiled is None or compile_options != self._compiled.options:
            self._compiled = CompiledForward(_forward_with_features, compile_options)
        return self._compiled((input_ids.shape[1], attention_mask.shape[-1], feature_layers, id(cache)), *args)

    def _packaged_forward(self, compile_options, input_ids, position_ids, attention_mask, cache, feature_layers):
        start = time.perf_counter()
        with self._lock:
            if self._packaged is None or self._packaged.identity["compile_options"] != compile_options:
                inductor_options = {**(compile_options.get("options") or {})}
                self._packaged = PackagedForward(self.package_dir, self.package_identity(compile_options), inductor_options)
        identifying = time.perf_counter() - start
        cache_tensors = static_cache_tensors(cache)
        key = (
            tuple(input_ids.shape), str(attention_mask.dtype), tuple(attention_mask.shape), feature_layers,
            tuple((str(t.dtype), tuple(t.shape), t.stride()) for t in cache_tensors),
        )

        def make_module():
            return _ForwardWithCacheInputs(weight_sharing_twin(self.model), cache, feature_layers)

        outputs, seconds = self._packaged(key, make_module, input_ids, position_ids, attention_mask, *cache_tensors)
        return (outputs[0], tuple(outputs[1:])), seconds + identifying

    def package_identity(self, compile_options: dict) -> dict:
        """What every package of this model depends on besides its shapes: the weights' digest,
        the config (attention implementation included) and the compile options."""
        try:
            weights = weights_digest(self.model)
        except Exception as error:  # noqa: BLE001 - e.g. weights on the meta device: no package, say why
            raise PackageBuildError(f"The model's weights cannot be digested for a package ({error}).") from error
        return {"weights": weights, "config": self.model.config.to_json_string(),
                "attn_implementation": self.model.config._attn_implementation, "compile_options": compile_options}


_FAST_PATH_LOCK = threading.Lock()


_UNCHANGED = object()


def _resolve_package_dir(package_dir) -> Path | None:
    if package_dir is None:
        return None
    return default_package_dir() if package_dir == DEFAULT_PACKAGE_DIR else Path(package_dir).expanduser()


def fast_path(model: PreTrainedModel, buckets: tuple[int, ...] | None = None, package_dir=_UNCHANGED) -> FastPath:
    """The model's :class:`FastPath` (made on first use, then kept on the model instance).

    ``buckets`` sets the verification sizes (default ``DEFAULT_BUCKETS``); other sizes than the
    current ones make a new path, whose graphs compile anew. The largest bucket caps each cycle's
    tree plus prompt-lookup chain. ``package_dir`` says where ahead-of-time packages are kept (see
    :class:`FastPath`; ``None``: no packages, compile in-process); another one than the current
    path's makes a new path. Arguments left out keep the current path's settings."""
    with _FAST_PATH_LOCK:  # two threads' first calls get the same one
        path = getattr(model, "_hf_adaptive_spec_fast_path", None)
        wanted_buckets = tuple(buckets) if buckets is not None else path.buckets if path else DEFAULT_BUCKETS
        if package_dir is _UNCHANGED:
            package_dir = path.package_dir if path is not None else DEFAULT_PACKAGE_DIR
        package_dir = _resolve_package_dir(package_dir)
        if path is None or wanted_buckets != path.buckets or package_dir != path.package_dir:
            path = FastPath(model, wanted_buckets, package_dir)
            model._hf_adaptive_spec_fast_path = path
        return path


def fast_path_compile_config(device: torch.device | str) -> CompileConfig:
    """The compile configuration this package measures with, for ``generate(compile_config=...)``
    (engine and stock alike). Inductor with static shapes: CUDA graphs on a GPU (``reduce-overhead``);
    on a CPU inductor's weight freezing (prepacked weights), which the CPU gain needs. The engine
    applies ``options={"freezing": True}`` around its compiled calls (inductor does not honour it as a
    ``torch.compile`` option); for stock ``generate`` set ``torch._inductor.config.freezing = True``
    or call it inside ``hf_adaptive_spec.core.compiled.inductor_settings(config.to_dict())``. Frozen
    graphs treat the weights as constants: do not train the model after compiling it."""
    if torch.device(device).type == "cpu":
        config = CompileConfig(fullgraph=False, dynamic=False, mode=None, options={"freezing": True})
    else:
        config = CompileConfig(fullgraph=False, dynamic=False, mode="reduce-overhead")
    config._compile_all_devices = True  # transformers compiles on CUDA/XPU only unless told
    return config


def compile_options(model: PreTrainedModel, model_kwargs: dict, config: GenerationConfig) -> dict | None:
    """``torch.compile`` kwargs when stock ``generate`` would compile this call (transformers' own
    criterion: a compileable cache, a GPU or ``compile_config._compile_all_devices``, no
    ``disable_compile``), else None."""
    criterion = getattr(model, "_valid_auto_compile_criteria", None)
    if criterion is None or not criterion(model_kwargs, config):
        return None
    compile_config = config.compile_config or model._default_compile_config()
    return compile_config.to_dict()


class StaticTarget(TargetForward):
    """Verification of padded trees in a fixed-size static cache (see the module docstring)."""

    def __init__(self, model: PreTrainedModel, cache, wanted: set[int], path: FastPath, options: dict | None):
        self.model, self.cache, self.path, self.options = model, cache, path, options
        self.wanted = tuple(sorted(wanted))
        self.rescorer = _rescorer(model)
        self.final_index = len(decoder_layers(model))
        # the forward's hidden-state outputs: the features, and the final norm's output for rescoring
        self.feature_layers = tuple(sorted(wanted | ({self.final_index} if self.rescorer is not None else set())))
        self.compiled = options is not None
        self.max_cache_len = cache.layers[0].max_cache_len
        self._features: Features = {}

    @property
    def packaged(self) -> bool:
        return self.path.packages(self.options)

    def prefill(self, input_ids: torch.LongTensor, model_kwargs: dict) -> tuple[TreeLogits, Features]:
        set_cache_length(self.cache, 0)
        positions = torch.arange(input_ids.shape[1], device=self.model.device)[None]
        out = self.model(
            input_ids=input_ids.to(self.model.device),
            position_ids=positions,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1,
            output_hidden_states=list(self.feature_layers) if self.feature_layers else False,
        )
        logits, hidden = out.logits[0, -1:], None
        if self.rescorer is not None:
            hidden = out.hidden_states[self.final_index][0, -1:]
            if not _lm_head_is_last_step(self.model, hidden[0], logits[0]):
                self.rescorer = None  # softcapped or scaled logits: no float32 products to recover
        features = {i: out.hidden_states[i] for i in self.wanted}
        return TreeLogits(logits=logits, hidden=hidden, rescorer=self.rescorer), features

    def verify(self, tree: DraftTree, past_length: int) -> TreeLogits:
        device, n = self.model.device, len(tree)
        bucket = self.path.bucket_for(n)
        padding = bucket - n
        input_ids = torch.tensor([tree.tokens + [tree.tokens[0]] * padding])
        positions = torch.tensor([[past_length + depth for depth in tree.depths] + [past_length] * padding])
        mask = static_tree_mask(tree.ancestor_mask(), past_length, bucket, self.max_cache_len, self.model.dtype, device)
        set_cache_length(self.cache, past_length)
        (logits, features), compile_seconds = self.path.forward(
            self.options,
            input_ids.to(device, non_blocking=True),
            positions.to(device, non_blocking=True),
            mask,
            self.cache,
            self.feature_layers,
        )
        self.compile_time += compile_seconds
        outputs = dict(zip(self.feature_layers, features))
        self._features = {i: outputs[i] for i in self.wanted}
        hidden = outputs[self.final_index][0, :n] if self.rescorer is not None else None
        return TreeLogits(logits=logits[0, :n], hidden=hidden, rescorer=self.rescorer)

    def commit(self, tree: DraftTree, past_length: int, keep: torch.Tensor) -> Features:
        compact_static_cache(self.cache, past_length, keep)
        return {i: feature[:, keep] for i, feature in self._features.items()}


def static_target(
    model: PreTrainedModel, cache, own: bool, wanted: set[int], model_kwargs: dict, config: GenerationConfig,
    needed_length: int,
) -> StaticTarget:
    """A :class:`StaticTarget` on ``cache`` (``own``: the model's fixed-size cache), checked for this call."""
    path = fast_path(model)
    check_static_cache(cache, needed_length + path.largest_bucket)
    if not own and cache.get_seq_length() > 0:
        raise ValueError(
            "assistant_policy cannot continue from a pre-filled StaticCache: call cache.reset() before generate."
        )
    options = compile_options(model, {**model_kwargs, "past_key_values": cache}, config)
    return StaticTarget(model, cache, wanted, path, options)
