"""The method registry: one small :class:`BenchMethod` subclass per ``--methods`` name.

To add a method, write a module with a ``BenchMethod`` subclass and list the class in
``METHOD_CLASSES``. ``<method>+lookup`` runs a tree method with the prompt-lookup branch;
``<method>+sized`` (last) runs it on the compiled path in a StaticCache sized for each call.
"""

from __future__ import annotations

from ..errors import MethodUnavailableError, UnknownMethodError
from .base import BenchMethod, SpeculationStatsLike
from .dvi import DVI
from .eagle3 import Eagle3, Eagle3Candidate
from .hf_assistant import HfAssistant
from .hf_early_exit import HfEarlyExit
from .hf_prompt_lookup import HfPromptLookup
from .lookup_branch import LOOKUP_SUFFIX, WithLookupBranch
from .learned_policies import Eagle3Confidence, Eagle3DefaultTree, Eagle3HeuristicLength, Eagle3LTD, Eagle3Radar, Eagle3ReSpS
from .stock import Stock, StockCompiled
from .tree import PlainSteps, Tree

METHOD_CLASSES: tuple[type[BenchMethod], ...] = (
    Stock, StockCompiled, HfPromptLookup, HfEarlyExit, HfAssistant, Tree, PlainSteps, Eagle3, Eagle3Candidate, Eagle3DefaultTree,
    Eagle3Confidence, Eagle3HeuristicLength, Eagle3LTD, Eagle3ReSpS, Eagle3Radar, DVI,
)
METHODS: dict[str, type[BenchMethod]] = {cls.name: cls for cls in METHOD_CLASSES}
#: ``<method>+sized``: the engine decodes each call in a StaticCache sized for it (see ``BenchMethod.sized_cache``).
SIZED_SUFFIX = "+sized"
REFERENCE_METHOD = Stock.name


def build_methods(names: list[str]) -> dict[str, BenchMethod]:
    """Instantiate the named methods, ``stock`` first (added when missing: it is the reference).

    Raises:
        UnknownMethodError: for a name that is not registered, listing the known ones.
    """
    unknown = [name for name in names if name.removesuffix(SIZED_SUFFIX).removesuffix(LOOKUP_SUFFIX) not in METHODS]
    if unknown:
        raise UnknownMethodError(
            f"unknown method(s) {', '.join(map(repr, unknown))}; known methods: {', '.join(METHODS)} "
            f"(append {LOOKUP_SUFFIX} to a tree method for the prompt-lookup branch, then {SIZED_SUFFIX} for a "
            "StaticCache sized per call)"
        )
    ordered = [REFERENCE_METHOD] + [name for name in dict.fromkeys(names) if name != REFERENCE_METHOD]
    return {name: _instantiate(name) for name in ordered}


def _instantiate(name: str) -> BenchMethod:
    base_name = name.removesuffix(SIZED_SUFFIX)
    if base_name.endswith(LOOKUP_SUFFIX):
        method = WithLookupBranch(METHODS[base_name.removesuffix(LOOKUP_SUFFIX)]())
    else:
        method = METHODS[base_name]()
    if name != base_name:
        method.name, method.sized_cache = name, True
    return method


__all__ = [
    "METHODS",
    "REFERENCE_METHOD",
    "SIZED_SUFFIX",
    "BenchMethod",
    "MethodUnavailableError",
    "SpeculationStatsLike",
    "build_methods",
]
