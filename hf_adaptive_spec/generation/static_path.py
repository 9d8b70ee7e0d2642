"""What a model keeps across ``generate`` calls for the static-cache path: the verification bucket
sizes, the compiled verification forward (in-process graphs, or ahead-of-time packages on a CPU with
weight freezing) and a fixed-size cache of its own; and the compile configuration this package
measures with. :class:`~hf_adaptive_spec.generation.targets.StaticTarget` runs a call on it."""

from __future__ import annotations

import os
import threading
import time
import warnings
import weakref
from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import CompileConfig, GenerationConfig, PreTrainedModel, StaticCache

from ..core.attention import attention_mask_argument
from ..core.compiled import CompiledForward, split_inductor_patches
from ..core.exclusive import claim_first_idle
from ..core.packaged import (
    DEFAULT_PACKAGE_DIR_TEXT,
    PackageBuildError,
    PackagedForward,
    StaleWeightsError,
    default_package_dir,
    forward_changes,
    mark_weights_changed,
    module_settings,
    module_settings_digest,
    weight_sharing_twin,
    weights_digest,
    weights_version,
)
from ..core.settings import distinct_ints_from_text
from ..core.static_cache import full_length_static_cache, static_cache_holding, static_cache_tensors
from ..core.values import check_number, plain_ints

#: verification forwards are padded to the smallest of these that fits the tree (see FastPath). On the
#: compiled bfloat16 path of a 2-core AMD EPYC a forward over 8 tokens costs what one costs and 12 about
#: 1.2x; with a tree of 8 and the prompt-lookup chain, (8, 12, 16, 32) ran 10% faster than (8, 16, 32)
#: (MT-bench, results/README.md). Graphs compile on a bucket's first use.
DEFAULT_BUCKETS = (8, 12, 16, 32)


def checked_buckets(buckets: Iterable[int]) -> tuple[int, ...]:
    """``buckets`` as a tuple of distinct positive ints in ascending order (ints of any kind: numpy's, a tensor's);
    refused otherwise, before a size fails inside a forward (a float, a bool, the command line's text)."""
    if isinstance(buckets, str):
        raise ValueError(f"Verification buckets are ints, got the text {buckets!r}: pass a tuple such as (2, 4, 8) "
                         "(buckets_from_text reads the command line's '2,4,8').")
    sizes = tuple(plain_ints(buckets))
    if (not sizes or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in sizes)
            or list(sizes) != sorted(set(sizes))):
        raise ValueError(f"Verification buckets must be distinct positive ints in ascending order, got {sizes}.")
    return sizes


def buckets_from_text(text: str) -> tuple[int, ...]:
    """Verification buckets written as sizes separated by commas (``"2,3,4,8"``, as the CLIs take them): distinct,
    ascending, each at least 2 (a tree verifies its root and at least one draft token). ValueError names the fix."""
    buckets = distinct_ints_from_text(text)
    if buckets is None:
        raise ValueError(f"Buckets are sizes separated by commas, e.g. 2,3,4,8, not {text!r}.")
    if buckets[0] < 2:
        raise ValueError(
            f"Buckets {text}: each verifies a root and at least one draft token: give sizes >= 2, e.g. 2,3,4,8."
        )
    return buckets


def _forward_with_features(model: PreTrainedModel, input_ids, position_ids, attention_mask, cache, feature_layers):
    """The target forward whose outputs are the logits of every row and the selected hidden states."""
    out = model(
        input_ids=input_ids,
        position_ids=position_ids,
        attention_mask=attention_mask_argument(model.config, attention_mask),
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


class _DefaultPackageDir:
    """``FastPath(package_dir=...)``'s default: ahead-of-time packages in
    :func:`~hf_adaptive_spec.core.packaged.default_package_dir` where they apply (an object of its own: a folder
    named ``default`` is a folder like any other)."""

    def __repr__(self) -> str:
        return f"<the default packages folder: {DEFAULT_PACKAGE_DIR_TEXT}>"


DEFAULT_PACKAGE_DIR = _DefaultPackageDir()


class FastPath:
    """What a model keeps across ``generate`` calls for static-shape verification: its bucket sizes,
    the compiled forward (one graph per bucket and feature set, built on first use) and, when the
    caller passes no cache, a fixed-size :class:`~transformers.StaticCache` of its own.

    The engine decodes each call in a cache of its own sized for that call (:meth:`rounded_cache_length`:
    ``cache_granularity`` slots doubled until the prompt, the new tokens and the largest bucket fit),
    one kept per size. A static cache attends over every slot, so a short call in a long call's cache
    would pay for slots it never uses: on a 2-core CPU an 8-token verification costs ~22 ms in 512
    slots and ~31 ms in 1,408, and Spec-Bench decodes 1.25x faster than in one cache fitting its
    longest question (results/README.md). Sizes double so that a process makes few of them: each has
    its own graphs (built, or loaded as packages, on first use), and the kept caches hold at most
    twice the largest one's memory. Pass a ``StaticCache`` of your own to keep one size and one set.

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
        self.model, self.buckets = model, checked_buckets(buckets)
        self.package_dir = _resolve_package_dir(package_dir)
        self.own_caches: dict[tuple, list[StaticCache]] = {}
        #: in-process graphs: per cache object when inductor freezes (the graph holds that cache's tensors)
        self._compiled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._packaged: PackagedForward | None = None
        self._weights_seen: tuple | None = None
        self._forward_changes: dict[str, tuple[int, ...]] = {}
        #: the modules and settings a package failed to build for (None: none failed); tried again once they change
        self._unpackageable: tuple | None = None
        self._lock = threading.Lock()
        self._cache_layouts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __reduce__(self):
        """A copy of the model (``copy.deepcopy``, pickle) gets a fresh path of the same settings: graphs, packages
        in use, kept caches and locks belong to this model's process and tensors (a lock made the copy fail)."""
        return FastPath, (self.model, self.buckets, self.package_dir)

    @property
    def packaged_forward(self) -> PackagedForward | None:
        """The ahead-of-time packages in use (with their ``built`` / ``loaded`` counts); None before any."""
        return self._packaged

    @property
    def packages_failed(self) -> bool:
        """Whether a package failed to build for the model's current modules and settings: verification compiles
        in-process until they change."""
        return self._unpackageable is not None

    @property
    def largest_bucket(self) -> int:
        return self.buckets[-1]

    def bucket_for(self, num_tokens: int) -> int:
        for bucket in self.buckets:
            if num_tokens <= bucket:
                return bucket
        raise ValueError(f"A tree of {num_tokens} nodes exceeds the largest verification bucket {self.largest_bucket}.")

    @classmethod
    def rounded_cache_length(cls, needed_length: int) -> int:
        """The length of the cache the engine makes for ``needed_length`` slots: ``cache_granularity``
        doubled until it fits."""
        length = cls.cache_granularity
        while length < needed_length:
            length *= 2
        return length

    def needed_slots(self, max_length: int) -> int:
        """Slots a call of ``max_length`` tokens (prompt and new) needs: its last tree, padded to the largest
        bucket, is written after them."""
        return max_length + self.largest_bucket

    def cache_for(self, needed_length: int, claim: bool = False, length: int | None = None) -> StaticCache:
        """The engine's own static cache for a call that needs ``needed_length`` slots (or ``length``, the call's
        ``max_cache_len``, when more: as stock's, a cache at least that long, which a later turn continues in): one
        of :meth:`rounded_cache_length` slots for the model's dtype and device that no running call holds, made on
        first use and kept (a few sizes, each doubling: a length per call would keep a cache and graphs per call;
        concurrent calls of one size each get their own: they were refused, told to pass a cache of their own
        though they had passed none). With ``claim`` (a ``generate`` call) it is claimed for the calling thread in
        the same step; :func:`~hf_adaptive_spec.core.exclusive.exclusive_use`'s ``held`` releases it."""
        if length is not None:
            check_number("generate", "max_cache_len", length, integer=True,
                         meaning="the static cache's slots, at least")
            needed_length = max(needed_length, length)
        # a cache made under torch.inference_mode holds inference tensors, whose in-place writes are refused outside
        # that mode: each mode has caches of its own
        key = (self.rounded_cache_length(needed_length), self.model.dtype, self.model.device,
               torch.is_inference_mode_enabled())
        with self._lock:
            caches = self.own_caches.setdefault(key, [])
        return claim_first_idle(caches, lambda: full_length_static_cache(self.model.config, key[0]), claim)

    def begin_call(self, compile_options: dict | None = None) -> bool:
        """Before each ``generate`` call (compiled with ``compile_options``); returns whether the call verifies from
        ahead-of-time packages (:meth:`packages`), decided once for the whole call.

        - When the model's weights changed since the last call (a training step, ``load_state_dict``, a tensor
          replaced), or a module or a module's setting did (an activation swapped, a norm's epsilon set:
          :func:`~hf_adaptive_spec.core.packaged.module_settings`), drop the graphs and packages compiled from the old
          ones. Frozen graphs hold the weights as constants and a package's name is the digest of the weights and
          settings it was built from, so both would otherwise go on computing with, or be saved under, the old
          ones.
        - When what changes the model's forward besides its code changed
          (:func:`~hf_adaptive_spec.core.packaged.forward_changes`: hooks, a replaced forward), drop the in-process
          graphs, which keep the hooks they were traced with; while there is any, compile in-process instead of
          running packages, which are traced without, and say so."""
        with self._lock:
            seen = (weights_version(self.model), module_settings(self.model))
            changes = forward_changes(self.model)
            if self._weights_seen is not None and seen != self._weights_seen:
                self._drop_compiled()
            if changes != self._forward_changes:
                self._compiled = weakref.WeakKeyDictionary()
            self._weights_seen, self._forward_changes = seen, changes
            if self._unpackageable is not None and self._unpackageable != seen[1]:
                self._unpackageable = None  # another module or setting since a package failed: try packages again
        applies = self._packaging_applies(compile_options)
        if changes and applies:
            names = list(changes)
            warnings.warn(
                f"{', '.join(names[:3])}{' and others' if len(names) > 3 else ''} of {type(self.model).__name__} "
                "change its forward (hooks, or a forward replaced on the instance), which ahead-of-time packages are "
                "traced without: the verification forward is compiled in-process instead (out.speculation.packaged "
                "is False). Remove the hooks (or `del module.forward`) to use packages.", stacklevel=2,
            )
        return applies and not changes

    def weights_changed(self) -> None:
        """Drop the graphs and packages compiled from the model's weights now: for a change :meth:`begin_call` does
        not see. It sees writes that bump a tensor's version (optimizer steps, ``copy_``, ``load_state_dict``) and
        replaced tensors; a write through ``.data`` (``p.data.add_(...)``) or to a tensor made under
        ``torch.inference_mode`` bumps none, and frozen graphs and packages would go on with the old weights.
        The model's modules are marked changed too, so a drafter sharing its layers (DVI) rebuilds its frozen
        steps; a drafter with weights of its own is told by its own ``weights_changed()``."""
        with self._lock:
            mark_weights_changed(self.model)
            self._drop_compiled()
            self._weights_seen = None

    def _drop_compiled(self) -> None:
        """Forget every in-process graph and the packages in use (under the lock)."""
        self._compiled = weakref.WeakKeyDictionary()
        self._packaged = None

    def packages(self, compile_options: dict | None) -> bool:
        """Whether forwards compiled with ``compile_options`` run as ahead-of-time packages: a CPU
        model, inductor's weight freezing, no CUDA-graph mode, a ``package_dir``, and nothing that changed
        the model's forward besides its code at the last :meth:`begin_call`."""
        return self._packaging_applies(compile_options) and not self._forward_changes

    def _packaging_applies(self, compile_options: dict | None) -> bool:
        if (compile_options is None or self.package_dir is None or self.packages_failed
                or self.model.device.type != "cpu"):
            return False
        inductor_options = split_inductor_patches(compile_options)[1]
        return bool(inductor_options.get("freezing")) and compile_options.get("mode") in (None, "default")

    def forward(self, compile_options: dict | None, input_ids, position_ids, attention_mask, cache, feature_layers,
                packaged: bool):
        """``((logits, features), seconds compiling)`` of one padded forward, compiled with
        ``compile_options`` (None: eager), from packages when ``packaged`` (the call's :meth:`begin_call`) and they
        have not failed to build."""
        args = (self.model, input_ids, position_ids, attention_mask, cache, feature_layers)
        if compile_options is None:
            return _forward_with_features(*args), 0.0
        if packaged and self.package_dir is not None and not self.packages_failed:
            try:
                return self._packaged_forward(compile_options, input_ids, position_ids, attention_mask, cache,
                                              feature_layers)
            except PackageBuildError as error:  # this model does not export: compile it in-process, with a word
                warnings.warn(
                    f"{error} Compiling in-process instead (out.speculation.packaged is False) until a module or a "
                    "module's setting changes.", stacklevel=2
                )
                self._unpackageable = module_settings(self.model)
        compiled = self._in_process_forward(compile_options, cache)
        return compiled((input_ids.shape[1], attention_mask.shape[-1], feature_layers, id(cache)), *args)

    def _in_process_forward(self, compile_options: dict, cache) -> CompiledForward:
        """The in-process compiled forward for ``cache``: with inductor's freezing one per cache object (a frozen
        graph holds the cache's tensors as constants, and dynamo does not guard on them), else one for all."""
        compiled = self._compiled.get(cache) or self._compiled.get(self)  # every cycle: a lookup, nothing more
        if compiled is not None and compiled.options == compile_options:
            return compiled
        owner = cache if split_inductor_patches(compile_options)[1].get("freezing") else self
        with self._lock:
            compiled = self._compiled.get(owner)
            if compiled is None or compiled.options != compile_options:
                compiled = self._compiled[owner] = CompiledForward(_forward_with_features, compile_options)
        return compiled

    def _packaged_forward(self, compile_options, input_ids, position_ids, attention_mask, cache, feature_layers):
        start = time.perf_counter()
        with self._lock:
            if self._packaged is None or self._packaged.identity["compile_options"] != compile_options:
                inductor_options = {**(compile_options.get("options") or {})}
                self._packaged = PackagedForward(
                    self.package_dir, self.package_identity(compile_options), inductor_options,
                    description={"model": self.model.config._name_or_path, "model_type": self.model.config.model_type,
                                 "dtype": str(self.model.dtype).removeprefix("torch.")},
                )
            packaged = self._packaged
        identifying = time.perf_counter() - start
        cache_tensors = static_cache_tensors(cache)
        layout = self._cache_layouts.get(cache)  # a cache's tensors keep their layout: read it once, not per cycle
        if layout is None:
            layout = self._cache_layouts[cache] = tuple(
                (str(t.dtype), tuple(t.shape), t.stride()) for t in cache_tensors
            )
        key = (tuple(input_ids.shape), str(attention_mask.dtype), tuple(attention_mask.shape), feature_layers, layout)

        def make_module():  # a package is saved under its identity's digests: they must be what is traced
            if module_settings_digest(self.model) != packaged.identity["modules"]:
                raise StaleWeightsError(
                    "A module or a module's setting of the model changed while a call was verifying (another thread?)"
                    ": its graphs and packages are dropped now, and the package is built for the new ones."
                )
            twin = weight_sharing_twin(self.model)
            if weights_digest(self.model) != packaged.identity["weights"]:
                raise StaleWeightsError(
                    "The model's weights changed in place without a version bump (a write through .data?) since its "
                    "packages were identified: their graphs and packages are dropped now, and verifications before "
                    "this one may have used the old weights. Call hf_adaptive_spec.fast_path(model).weights_changed() "
                    "right after such a write."
                )
            return _ForwardWithCacheInputs(twin, cache, feature_layers)

        try:
            outputs, seconds = packaged(key, make_module, input_ids, position_ids, attention_mask, *cache_tensors)
        except StaleWeightsError as stale:
            warnings.warn(str(stale), stacklevel=2)
            self.weights_changed()
            return self._packaged_forward(compile_options, input_ids, position_ids, attention_mask, cache,
                                          feature_layers)
        return (outputs[0], tuple(outputs[1:])), seconds + identifying

    def package_identity(self, compile_options: dict) -> dict:
        """What every package of this model depends on besides its shapes: the weights' digest, its modules'
        classes and settings (a package found on disk for a model whose activation was swapped is not loaded), the
        config (attention implementation included) and the compile options."""
        try:
            weights = weights_digest(self.model)
        except Exception as error:
            raise PackageBuildError(f"The model's weights cannot be digested for a package ({error}).") from error
        return {"weights": weights, "modules": module_settings_digest(self.model),
                "config": self.model.config.to_json_string(),
                "attn_implementation": self.model.config._attn_implementation, "compile_options": compile_options}


_FAST_PATH_LOCK = threading.Lock()


_UNCHANGED = object()


def _resolve_package_dir(package_dir) -> Path | None:
    """The packages folder ``package_dir`` names: None (no packages), :data:`DEFAULT_PACKAGE_DIR`, or a folder given as
    a str or os.PathLike; other values and an empty one (the current folder) are refused, naming what is taken."""
    if package_dir is None:
        return None
    if package_dir is DEFAULT_PACKAGE_DIR:
        return default_package_dir()
    folder = os.fspath(package_dir) if isinstance(package_dir, (str, os.PathLike)) else None
    taken = f"str or os.PathLike (None: no packages, compile in-process; left out: {DEFAULT_PACKAGE_DIR_TEXT})"
    if not isinstance(folder, str):
        raise TypeError(f"package_dir is the packages folder, a {taken}; got {type(package_dir).__name__} "
                        f"{package_dir!r:.80}.")
    if not folder.strip():
        raise ValueError(f"package_dir is empty (it would be the current folder): pass the packages folder, a {taken}.")
    return Path(folder).expanduser()


def fast_path(model: PreTrainedModel, buckets: tuple[int, ...] | None = None, package_dir=_UNCHANGED) -> FastPath:
    """The model's :class:`FastPath` (made on first use, then kept on the model instance).

    ``buckets`` sets the verification sizes (default ``DEFAULT_BUCKETS``); other sizes than the
    current ones make a new path, whose graphs compile anew. The largest bucket caps each cycle's
    tree plus prompt-lookup chain. ``package_dir`` says where ahead-of-time packages are kept (see
    :class:`FastPath`; ``None``: no packages, compile in-process); another one than the current
    path's makes a new path. Arguments left out keep the current path's settings."""
    with _FAST_PATH_LOCK:  # two threads' first calls get the same one
        path = getattr(model, "_hf_adaptive_spec_fast_path", None)
        wanted_buckets = checked_buckets(buckets) if buckets is not None else path.buckets if path else DEFAULT_BUCKETS
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
