"""Wall-clock timing on any device."""

from __future__ import annotations

import torch


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device``, so that a wall-clock reading after it covers that work
    (CUDA runs asynchronously; a CPU has nothing queued)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
