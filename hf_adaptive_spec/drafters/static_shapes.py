"""What a drafter with fixed-shape steps keeps across ``generate`` calls (see :class:`Drafter.use_static_shapes`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..core.attention import is_sliding_layer
from ..core.packaged import mark_weights_changed, weights_version
from ..core.static_steps import StaticDraftSteps, tree_level_rows
from ..core.tree import DraftTree


def placement(module: nn.Module) -> tuple[torch.device, torch.dtype] | None:
    """The device and dtype of ``module``'s first floating-point parameter (None when it has none)."""
    param = next((p for p in module.parameters() if p.is_floating_point()), None)
    return None if param is None else (param.device, param.dtype)


class StaticShapesMixin:
    """Implements :meth:`~hf_adaptive_spec.drafters.base.Drafter.use_static_shapes` and
    ``compile_time`` for a drafter whose steps run in a :class:`StaticDraftSteps`: built on the first
    static call, kept (with its compiled graphs) while it is large enough and the compile options
    are the same. The drafter calls :meth:`_reset_static_shapes` from ``bind``; ``_static_in_use``
    tells its steps which path to take.

    A drafter whose steps are one forward of a transformers model sets :attr:`_static_step` and
    returns that model from :meth:`_static_model`; a model with sliding-window layers then keeps
    drafting on its growing cache, whose masks apply the window. Other drafters override
    :meth:`_static_steps`.
    """

    _static: StaticDraftSteps | None = None
    _static_in_use = False
    _static_weights_version: tuple | None = None  # the weights' version the static steps were last used with
    #: ``step(model, *rows, position_ids, mask, cache, output_rows)`` returning a tuple of row-first outputs
    #: (see :class:`~hf_adaptive_spec.core.static_steps.StaticDraftSteps`).
    _static_step: Callable | None = None

    def __getstate__(self) -> dict:
        """A copy (``copy.deepcopy``, pickle) keeps the drafter's settings and weights but not its step graphs,
        which hold the original's weights and cache: its first static call builds its own. Pickling the graphs
        failed (compiled step functions do not pickle), and deep-copying them copied graphs it could never use."""
        state = self.__dict__.copy()
        for name in ("_static", "_static_in_use", "_static_weights_version"):
            state.pop(name, None)
        return state

    def _static_model(self) -> nn.Module | None:
        """The model :attr:`_static_step` runs (None: the drafter builds its own runner)."""
        return None

    def _static_weights(self) -> nn.Module | None:
        """The module whose weights the static steps compute with (frozen graphs hold them as constants)."""
        return self._static_model()

    def _static_steps(self, max_length: int, compile_options: dict | None) -> StaticDraftSteps:
        model = self._static_model()
        return StaticDraftSteps(self._static_step, model.config, model.device, model.dtype, max_length, compile_options)

    def use_static_shapes(self, max_length: int, compile_options: dict | None) -> None:
        """Draft in a fixed-size cache at padded shapes (compiled with ``compile_options``)."""
        model = self._static_model()
        if model is not None and any(is_sliding_layer(model.config, i) for i in range(model.config.num_hidden_layers)):
            return
        current = self._static
        weights = self._static_weights()
        version = weights_version(weights) if weights is not None else None
        # frozen graphs hold the weights they were compiled with: written since (a fine-tuned drafter, the target
        # an early-exit drafter shares layers with), they would go on drafting with the old ones
        stale = current is not None and current.freezes and version != self._static_weights_version
        # the cache and masks are allocated in the weights' dtype and device: moved since (model.to(torch.bfloat16),
        # or the target's layers an early-exit drafter shares), the next step would write into the old cache
        placed = placement(weights) if weights is not None else None
        moved = current is not None and placed is not None and placed != (current.device, current.dtype)
        # a cache built under torch.inference_mode refuses the in-place writes of a call made outside it
        stranded = current is not None and not torch.is_inference_mode_enabled() and current.made_in_inference_mode
        if current is None or stale or moved or stranded or not current.fits(max_length, compile_options):
            if current is not None and current.max_cache_len < current.slots_needed(max_length):
                # each cache length compiles the step graphs anew, and dynamo fails past a number of
                # graphs per step function (shared by every drafter using it): grow geometrically
                max_length = max(max_length, 2 * current.max_cache_len)
            self._static = self._static_steps(max_length, compile_options)
        self._static_weights_version = version
        self._static_in_use = True

    def weights_changed(self) -> None:
        """Rebuild the frozen step graphs at the next call: the weights were written without a version bump. A
        drafter sharing the target's layers is also told by ``hfas.fast_path(target).weights_changed()``."""
        weights = self._static_weights()
        if weights is not None:
            mark_weights_changed(weights)

    def _static_committed_step(self, tokens: torch.LongTensor, committed: int) -> tuple[torch.Tensor, ...]:
        """:attr:`_static_step` over ``tokens`` ``[1, n]``, the committed tokens after the first
        ``committed`` (causal among themselves): the outputs of the last one alone (``[1, ...]``)."""
        new = tokens.shape[1]
        causal = torch.ones(new, new, dtype=torch.bool, device="cpu").tril()
        positions = torch.arange(committed, committed + new, device="cpu")
        return self._static.run("committed", (self._static_model(),), (tokens,), positions, causal, committed,
                                last_row_only=True)

    def _static_level_step(
        self, tree: DraftTree, fed: list[int], nodes: list[int], committed: int
    ) -> tuple[torch.Tensor, ...]:
        """:attr:`_static_step` over one tree level, after the ``fed`` nodes of this cycle."""
        tokens, positions, visible = tree_level_rows(tree, fed, nodes, committed - 1, self._static_model().device)
        return self._static.run("level", (self._static_model(),), (tokens,), positions, visible, committed)

    def _reset_static_shapes(self) -> None:
        """Back to the growing cache until the next :meth:`use_static_shapes`; the compile time restarts."""
        self._static_in_use = False
        if self._static is not None:
            self._static.compile_time = 0.0

    @property
    def compile_time(self) -> float:
        return self._static.compile_time if self._static is not None else 0.0
