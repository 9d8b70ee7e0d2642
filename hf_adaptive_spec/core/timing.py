"""Wall-clock timing on any device."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

import torch

T = TypeVar("T")


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device``, so that a wall-clock reading after it covers that work
    (CUDA runs asynchronously; a CPU has nothing queued)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, call: Callable[[], T]) -> tuple[T, float]:
    """``(call(), wall-clock seconds)``, the work queued on ``device`` before and by the call waited for on both
    sides (:func:`synchronize`), so that the seconds are the call's own."""
    synchronize(device)
    start = time.perf_counter()
    result = call()
    synchronize(device)
    return result, time.perf_counter() - start
