"""One ``generate`` call at a time per drafter, policy and cache: claimed together, atomically.

The concurrency contract: concurrent ``generate`` calls on one enabled model work when each has
its own drafter, policy and cache (the engine keeps every other piece of per-call state in the
call; hidden-state capture belongs to the calling thread). An object that a running call holds is
refused to a second call with an error naming it, before the second call touches any state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_HOLDERS: dict[int, int] = {}  # id(object) -> the thread id of the call holding it


@contextmanager
def exclusive_use(objects: dict[str, object | None]) -> Iterator[None]:
    """Hold every named object (None entries are skipped) for the duration of the block.

    Raises:
        RuntimeError: when another call holds one of them; nothing is claimed then.
    """
    claimed = {name: obj for name, obj in objects.items() if obj is not None}
    with _LOCK:
        for name, obj in claimed.items():
            holder = _HOLDERS.get(id(obj))
            if holder is not None:
                where = (
                    "this thread (a nested generate call)" if holder == threading.get_ident() else f"thread {holder}"
                )
                raise RuntimeError(
                    f"The {name} ({type(obj).__name__}) is in use by another generate call, in {where}. A drafter, a "
                    "policy and a cache serve one generate call at a time: give each concurrent call its own (they "
                    "are cheap to create; drafters built from one checkpoint can share its weights)."
                )
        for obj in claimed.values():
            _HOLDERS[id(obj)] = threading.get_ident()
    try:
        yield
    finally:
        with _LOCK:
            for obj in claimed.values():
                _HOLDERS.pop(id(obj), None)
