"""What autograd keeps for the backward pass: the memory a training step holds between its forward
and backward, the part that bounds the batch on an accelerator."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def kept_for_backward(fn: Callable[[], T]) -> tuple[T, int]:
    """``fn()`` and the bytes of the distinct storages autograd saved for the backward pass while it
    ran (a storage saved twice, or a view of one already counted, counts once)."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = fn()
    return result, sum(storages.values())
