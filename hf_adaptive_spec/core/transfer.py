"""Host-to-device copies on the decoding path that do not wait for the device's queued work.

A ``.to(device)`` from host memory without ``non_blocking`` waits, on CUDA, for the work queued before it (a
synchronisation per copy, several per cycle). ``non_blocking=True`` from a pageable host tensor is safe when the tensor
is fresh, built for this call: CUDA stages pageable memory before the call returns, so nothing can overwrite it
mid-copy. A host buffer reused across calls must not be copied so (a pinned one would race); nor may a copy to the
host be read without a synchronisation. On the CPU both are the plain copy (or none)."""

from __future__ import annotations

from typing import Any

import torch


def to_device(host_tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``host_tensor`` (fresh, built for this call) on ``device``, by a copy that does not wait for queued work."""
    return host_tensor.to(device, non_blocking=True)


def upload(values: Any, like: torch.Tensor) -> torch.Tensor:
    """``values`` (nested Python numbers) as a tensor of ``like``'s dtype on its device: one copy that does not wait
    for the device's queued work."""
    return to_device(torch.tensor(values, dtype=like.dtype, device="cpu"), like.device)
