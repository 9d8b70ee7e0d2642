"""A count of the torch functions a block calls, for tests of what the hot path runs."""

from __future__ import annotations

from collections import Counter

from torch.overrides import TorchFunctionMode


class TorchCalls(TorchFunctionMode):
    """Counts the torch functions called inside the ``with`` block (``counts[func]``)."""

    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.counts[func] += 1
        return func(*args, **(kwargs or {}))
