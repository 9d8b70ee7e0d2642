"""Count the target's full-depth forward passes, for τ of methods that report no statistics."""

from __future__ import annotations

from torch import nn


class TargetPassCounter:
    """Counts calls of the target's last decoder layer.

    Early-exit drafts stop before that layer and draft models (even ones sharing the
    target's first layers) never run it, so for greedy assisted decoding the count is the
    number of verification passes, prefill included, and ``new_tokens / count`` is τ.

    Args:
        model: the target causal LM; counting is off (``count`` stays None) when its decoder
            layers cannot be found.
    """

    def __init__(self, model: nn.Module):
        layers = getattr(model.get_decoder(), "layers", None) if hasattr(model, "get_decoder") else None
        self.count: int | None = 0 if layers else None
        self._handle = layers[-1].register_forward_hook(self._hook) if layers else None

    def reset(self) -> None:
        """Start counting from zero."""
        if self.count is not None:
            self.count = 0

    def close(self) -> None:
        """Remove the hook."""
        if self._handle is not None:
            self._handle.remove()

    def _hook(self, module: nn.Module, args: object, output: object) -> None:
        self.count += 1
