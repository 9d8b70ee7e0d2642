"""The method registry: one small :class:`BenchMethod` subclass per ``--methods`` name.

To add a method, write a module with a ``BenchMethod`` subclass and list the class in
``METHOD_CLASSES``. ``<method>@D/K/N`` runs a static-tree method (``tree``, ``eagle3``, ``eagle3-candidate``)
on its own tree (depth D, top-k K, N tokens verified) instead of ``--tree-*``, so one interleaved run compares
trees; ``<method>+lookup`` then runs a tree method with the prompt-lookup branch (``+lookupN``: of N tokens, over
``--lookup-tokens``); ``<method>+sized`` (last) runs
it on the compiled path in a StaticCache sized for each call: ``eagle3@3/8/8+lookup+sized``. In a run below
float32, ``<method>+fp32`` (after everything else) runs a method on the run's float32 copy of the model, so that one
interleaved run compares, e.g., the engine in float32 with compiled bfloat16 stock: ``eagle3+lookup+sized+fp32``.
"""

from __future__ import annotations

from ..errors import MethodUnavailableError, UnknownMethodError
from .base import BenchMethod, SpeculationStatsLike
from .dvi import DVI
from .eagle3 import Eagle3, Eagle3Candidate, Eagle3LookupFirst
from .hf_assistant import HfAssistant
from .hf_early_exit import HfEarlyExit
from .hf_prompt_lookup import HfPromptLookup
from .learned_policies import (
    Eagle3CandidatePolicy,
    Eagle3Confidence,
    Eagle3DefaultTree,
    Eagle3HeuristicLength,
    Eagle3LTD,
    Eagle3Radar,
    Eagle3ReSpS,
)
from .lookup_branch import LOOKUP_SUFFIX, WithLookupBranch, split_lookup
from .stock import Stock, StockCompiled
from .tree import PlainSteps, Tree

METHOD_CLASSES: tuple[type[BenchMethod], ...] = (
    Stock, StockCompiled, HfPromptLookup, HfEarlyExit, HfAssistant, Tree, PlainSteps, Eagle3, Eagle3Candidate,
    Eagle3LookupFirst, Eagle3DefaultTree, Eagle3Confidence, Eagle3HeuristicLength, Eagle3LTD, Eagle3ReSpS, Eagle3Radar,
    Eagle3CandidatePolicy, DVI,
)
METHODS: dict[str, type[BenchMethod]] = {cls.name: cls for cls in METHOD_CLASSES}
#: ``<method>+sized``: the engine decodes each call in a StaticCache sized for it (see ``BenchMethod.sized_cache``).
SIZED_SUFFIX = "+sized"
#: ``<method>@D/K/N``: a static-tree method on its own tree (see ``BenchMethod.tree_shape``).
TREE_SHAPE_SEPARATOR = "@"
#: ``<method>+fp32``: a method decoding with the run's float32 copy of the model (see ``BenchMethod.in_float32``).
FLOAT32_SUFFIX = "+fp32"
REFERENCE_METHOD = Stock.name


def build_methods(names: list[str]) -> dict[str, BenchMethod]:
    """Instantiate the named methods, ``stock`` first (added when missing: it is the reference).

    Raises:
        UnknownMethodError: for a name that is not registered, listing the known ones.
    """
    unknown = [name for name in names if registered_name(name) not in METHODS]
    if unknown:
        raise UnknownMethodError(
            f"unknown method(s) {', '.join(map(repr, unknown))}; known methods: {', '.join(METHODS)} "
            f"(append {TREE_SHAPE_SEPARATOR}D/K/N to a static-tree method for its own tree, {LOOKUP_SUFFIX} (or "
            f"{LOOKUP_SUFFIX}N for N tokens) to a tree method for the prompt-lookup branch, then {SIZED_SUFFIX} for a "
            f"StaticCache sized per call, then {FLOAT32_SUFFIX} to run it in float32 in a run of another dtype)"
        )
    ordered = [REFERENCE_METHOD] + [name for name in dict.fromkeys(names) if name != REFERENCE_METHOD]
    return {name: _instantiate(name) for name in ordered}


def registered_name(name: str) -> str:
    """The registry name in ``<method>[@D/K/N][+lookup[N]][+sized][+fp32]``."""
    return split_lookup(
        name.removesuffix(FLOAT32_SUFFIX).removesuffix(SIZED_SUFFIX)
    )[0].partition(TREE_SHAPE_SEPARATOR)[0]


def _instantiate(name: str) -> BenchMethod:
    if name.endswith(FLOAT32_SUFFIX):
        method = _instantiate(name.removesuffix(FLOAT32_SUFFIX))
        method.name, method.in_float32 = name, True
        return method
    base_name = name.removesuffix(SIZED_SUFFIX)
    shaped_name, lookup, lookup_tokens = split_lookup(base_name)
    method = METHODS[registered_name(name)]()
    shape = _tree_shape(shaped_name, method) if TREE_SHAPE_SEPARATOR in shaped_name else None
    if lookup:
        method = WithLookupBranch(method, lookup_tokens)
    method.name, method.tree_shape = base_name, shape
    if name != base_name:
        method.name, method.sized_cache = name, True
    return method


def _tree_shape(shaped_name: str, method: BenchMethod) -> tuple[int, int, int]:
    """(depth, top_k, total_tokens) of ``<method>@D/K/N``.

    Raises:
        UnknownMethodError: when the method drafts no static tree of ``--tree-*`` or the shape is not D/K/N.
    """
    registered, _, shape = shaped_name.partition(TREE_SHAPE_SEPARATOR)
    if not method.static_tree:
        static = ", ".join(name for name, cls in METHODS.items() if cls.static_tree)
        raise UnknownMethodError(
            f"{shaped_name!r}: {TREE_SHAPE_SEPARATOR}D/K/N sets the static tree of {static}; "
            f"{registered} does not draft one."
        )
    parts = shape.split("/")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        raise UnknownMethodError(
            f"{shaped_name!r}: write the tree as {registered}{TREE_SHAPE_SEPARATOR}DEPTH/TOP_K/TOKENS, e.g. "
            f"{registered}{TREE_SHAPE_SEPARATOR}3/8/8 (tokens verified per cycle, root included)."
        )
    depth, top_k, total_tokens = (int(part) for part in parts)
    return depth, top_k, total_tokens


__all__ = [
    "FLOAT32_SUFFIX",
    "METHODS",
    "REFERENCE_METHOD",
    "SIZED_SUFFIX",
    "TREE_SHAPE_SEPARATOR",
    "BenchMethod",
    "MethodUnavailableError",
    "SpeculationStatsLike",
    "build_methods",
]
