"""A ``torch.compile``'d forward with static shapes, as the engine and the drafters run them."""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Hashable

import torch
import torch._dynamo.config as dynamo_config
import torch._inductor.config as inductor_config
from torch._dynamo.exc import FailOnRecompileLimitHit
from torch._dynamo.utils import counters

#: one function compiles one graph per bucket, feature set and cache; dynamo's default limit (8 per
#: function) would silently fall back to eager past it, so the limit is raised and hitting it raises.
GRAPH_LIMITS = {"recompile_limit": 64, "fail_on_recompile_limit_hit": True}

#: inductor settings that ``torch.compile(options=...)`` does not reach in time (inductor reads
#: ``freezing`` before it applies the options), so they are set around each call instead.
CALL_TIME_INDUCTOR_SETTINGS = ("freezing",)


def split_inductor_patches(compile_kwargs: dict) -> tuple[dict, dict]:
    """``(torch.compile kwargs, inductor config patches)``: the settings of
    :data:`CALL_TIME_INDUCTOR_SETTINGS` move out of ``options`` into patches for the calls."""
    kwargs = dict(compile_kwargs)
    options = dict(kwargs.get("options") or {})
    patches = {name: options.pop(name) for name in CALL_TIME_INDUCTOR_SETTINGS if name in options}
    kwargs["options"] = options or None
    return kwargs, patches


def inductor_settings(compile_kwargs: dict | None):
    """A context applying the call-time inductor settings of ``compile_kwargs`` (e.g. around a
    stock ``generate`` that compiles with them); a no-op without any."""
    return inductor_config.patch(split_inductor_patches(compile_kwargs or {})[1])


def own_code_copy(fn: Callable) -> Callable:
    """``fn`` with a code object of its own. Dynamo keeps compiled graphs per code object and guards neither
    on parameter values nor on a static cache's tensors, which inductor's freezing bakes into a graph as
    constants: graphs compiled from a copy are that copy's alone, never another compile's stale ones."""
    if not isinstance(fn, types.FunctionType):
        return fn
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


class CompiledForward:
    """``fn`` compiled with ``torch.compile(**options)``, called with a shape key per call.

    Each new key (a bucket size, a feature set ...) compiles a graph on its first call, and dynamo compiles a
    seen key's again when one of its guards fails (the model put in training mode, another autocast ...); the
    seconds of a call that compiled are returned as compile time, so that callers report them apart from
    decoding time.
    A failure while compiling names the way out (running uncompiled).
    """

    def __init__(self, fn: Callable, options: dict):
        self.options = options
        compile_kwargs, self._inductor_patches = split_inductor_patches(options)
        self._compiled = torch.compile(own_code_copy(fn), **compile_kwargs)
        self._warm: set[Hashable] = set()

    @property
    def freezes(self) -> bool:
        """Whether inductor's freezing bakes the weights into the graphs as constants (a weight written later is
        not seen by them)."""
        return bool(self._inductor_patches.get("freezing"))

    def __call__(self, key: Hashable, *args) -> tuple[object, float]:
        """``(fn(*args), seconds compiling)``: the compile seconds are 0 once ``key`` has run, unless dynamo
        compiled a graph again in this call."""
        start, graphs = time.perf_counter(), graphs_compiled()
        try:
            with inductor_config.patch(self._inductor_patches), dynamo_config.patch(GRAPH_LIMITS):
                result = self._compiled(*args)
        except Exception as error:
            if key in self._warm:
                raise
            raise RuntimeError(compile_failure_message(error)) from error
        first_use, compiled_now = key not in self._warm, graphs_compiled() != graphs
        self._warm.add(key)
        if compiled_now or (first_use and self.records_cuda_graphs and _on_cuda(args)):
            return result, time.perf_counter() - start
        return result, 0.0

    @property
    def records_cuda_graphs(self) -> bool:
        """Whether inductor records CUDA graphs (``mode="reduce-overhead"``) for inputs on a GPU: there a key's first
        call is a warm-up paid once per key (a new cache included) though dynamo compiles nothing, and is counted
        (the recording itself may fall on a later call, which is not: unmeasured here, no GPU lent). Elsewhere
        a call that compiled no graph took no compile time, whatever its key: a new cache of the same shapes reuses
        the graphs (its first verifications were booked as compile time, and left out of the time a policy
        observes)."""
        backend = self.options.get("backend") or "inductor"
        return backend == "inductor" and self.options.get("mode") in ("reduce-overhead", "max-autotune")


def _on_cuda(args: tuple) -> bool:
    return any(isinstance(arg, torch.Tensor) and arg.is_cuda for arg in args)


def graphs_compiled() -> int:
    """Graphs dynamo has compiled in this process (a count: reading it costs no synchronisation)."""
    return counters["stats"]["unique_graphs"]


def compile_failure_message(error: Exception) -> str:
    """What went wrong while compiling a forward, and the way out."""
    if isinstance(error, FailOnRecompileLimitHit):
        return (
            f"torch.compile has compiled {GRAPH_LIMITS['recompile_limit']} graphs of one speculative-decoding forward "
            "in this process. Each drafter object compiles its own (with freezing=True its weights are graph "
            "constants), one per bucket, step kind and cache length, so loading a drafter again for each call or "
            "method adds graphs. Reuse one drafter object across generate calls, raise "
            "hf_adaptive_spec.core.compiled.GRAPH_LIMITS['recompile_limit'], or run uncompiled "
            "(generate(..., disable_compile=True))."
        )
    return (
        f"Compiling a speculative-decoding forward failed ({type(error).__name__}: {error}). Run uncompiled "
        "with generate(..., disable_compile=True), or without compile_config."
    )
