"""One ``generate`` call at a time per drafter, policy and cache: claimed together, atomically.

The concurrency contract: concurrent ``generate`` calls on one enabled model work when each has
its own drafter, policy and cache (the engine keeps every other piece of per-call state in the
call; hidden-state capture belongs to the calling thread). An object that a running call holds is
refused to a second call with an error naming it, before the second call touches any state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
#: id(object) -> (the thread id of the call holding it, the object: kept alive while held, so that its id is not
#: reused by another object meanwhile)
_HOLDERS: dict[int, tuple[int, object]] = {}


@contextmanager
def exclusive_use(objects: dict[str, object | None], held: tuple = ()) -> Iterator[None]:
    """Hold every named object (None entries are skipped) for the duration of the block; ``held`` are objects this
    call claimed already (:func:`claim_first_idle`), released with the others.

    Raises:
        RuntimeError: when another call holds one of them; nothing is claimed then (and ``held`` is released).
    """
    claimed = {name: obj for name, obj in objects.items() if obj is not None and not any(obj is h for h in held)}
    try:
        _claim(claimed)
    except RuntimeError:
        _release(held)
        raise
    try:
        yield
    finally:
        _release((*claimed.values(), *held))


def claim_first_idle(candidates: list, make: Callable[[], object], claim: bool = True) -> object:
    """The first of ``candidates`` no call holds (else ``make()``, appended to them), with ``claim`` claimed for this
    thread in the same step, so that two calls choosing at once never get the same one: pass it to
    :func:`exclusive_use` as ``held``, which releases it."""
    with _LOCK:
        chosen = next((obj for obj in candidates if id(obj) not in _HOLDERS), None)
        if chosen is None:
            chosen = make()
            candidates.append(chosen)
        if claim:
            _HOLDERS[id(chosen)] = (threading.get_ident(), chosen)
        return chosen


def _claim(claimed: dict[str, object]) -> None:
    with _LOCK:
        for name, obj in claimed.items():
            holder = _HOLDERS.get(id(obj), (None,))[0]
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
            _HOLDERS[id(obj)] = (threading.get_ident(), obj)


def _release(objects) -> None:
    with _LOCK:
        for obj in objects:
            _HOLDERS.pop(id(obj), None)

