"""What a drafter with fixed-shape steps keeps across ``generate`` calls (see :class:`Drafter.use_static_shapes`)."""

from __future__ import annotations

from ..core.static_steps import StaticDraftSteps


class StaticShapesMixin:
    """Implements :meth:`~hf_adaptive_spec.drafters.base.Drafter.use_static_shapes` and
    ``compile_time`` for a drafter whose steps run in a :class:`StaticDraftSteps`: built on the first
    static call, kept (with its compiled graphs) while it is large enough and the compile options
    are the same. The drafter defines :meth:`_static_steps` and calls :meth:`_reset_static_shapes`
    from ``bind``; ``_static_in_use`` tells its steps which path to take."""

    _static: StaticDraftSteps | None = None
    _static_in_use = False

    def _static_steps(self, max_length: int, compile_options: dict | None) -> StaticDraftSteps:
        raise NotImplementedError

    def use_static_shapes(self, max_length: int, compile_options: dict | None) -> None:
        """Draft in a fixed-size cache at padded shapes (compiled with ``compile_options``)."""
        if self._static is None or not self._static.fits(max_length, compile_options):
            self._static = self._static_steps(max_length, compile_options)
        self._static_in_use = True

    def _reset_static_shapes(self) -> None:
        """Back to the growing cache until the next :meth:`use_static_shapes`; the compile time restarts."""
        self._static_in_use = False
        if self._static is not None:
            self._static.compile_time = 0.0

    @property
    def compile_time(self) -> float:
        return self._static.compile_time if self._static is not None else 0.0
