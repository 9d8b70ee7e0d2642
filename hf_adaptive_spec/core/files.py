"""Writing a small file whole or not at all; one writer of a file at a time; giving written files the mode the umask
gives."""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

#: the names of :func:`write_text_atomically`'s temporary files after the target's name (``.<pid>-<8 hex>.partial``;
#: before 2026-12-06 a fixed ``.partial``, which two writers of one file shared), as a regular expression
TEMPORARY_NAME_SUFFIX = r"(\.\d+-[0-9a-f]{8})?\.partial"


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it: a reader (or a crash) never meets half a
    file. The temporary name is this writer's own (process id and a random part): two processes writing one file at
    once (two builders of one package) each rename a whole file of their own, and the last one stays."""
    partial = path.with_name(f"{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except BaseException:  # a full disk, an interrupt: leave no temporary file behind (the first error is raised)
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise


def lock_exclusively(path: Path, held_elsewhere: str) -> IO[str]:
    """An exclusive lock on the file ``path`` (made empty if missing), held by the returned open file until it closes
    (a context manager). Another process (or another open file here) holding it: a ``RuntimeError`` of
    ``held_elsewhere``, which names the file, why two writers are refused and what to do. A file replaced or removed
    between the open and the lock (its holder renamed another over it, or removed the lock file it made) is not the
    one the path names: the lock is taken again on the one it names. Without ``flock`` (Windows) none is taken: one
    writer at a time is the user's to keep."""
    for _ in range(3):
        handle = open(path, "a")  # noqa: SIM115 (the lock lives as long as the returned file)
        if fcntl is None:
            return handle
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise RuntimeError(held_elsewhere) from None
        if _names(path, handle):
            return handle
        handle.close()
    raise RuntimeError(held_elsewhere)  # replaced at every try: another writer is busy with it


def _names(path: Path, handle: IO[str]) -> bool:
    """Whether ``path`` still names the file ``handle`` has open."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(handle.fileno()))
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def holding_lock(path: Path, held_elsewhere: str) -> Iterator[None]:
    """:func:`lock_exclusively` on ``path`` (its folder made if missing) for the ``with`` block. A file the lock made
    and nothing filled is removed: a run refused, or one that wrote nothing there, leaves none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    with lock_exclusively(path, held_elsewhere):
        try:
            yield
        finally:
            if not existed and path.is_file() and path.stat().st_size == 0:
                path.unlink()


def give_files_the_umask_mode(*paths: Path) -> None:
    """Give each file of ``paths`` (a folder: the files in it) the mode a new file gets there (0o666 less the umask).
    safetensors 0.8 writes through a temporary file of mode 0600 whatever the umask (safetensors issue 782): a saved
    model, policy or the default model's cache was readable by the user who wrote it alone, in a folder others may
    share."""
    for path in paths:
        folder = path if path.is_dir() else path.parent
        probe = folder / f".mode-probe-{uuid.uuid4().hex[:8]}"
        probe.touch()
        mode = stat.S_IMODE(probe.stat().st_mode)
        probe.unlink()
        for file in (folder.iterdir() if path.is_dir() else (path,)):
            if file.is_file():
                file.chmod(mode)


def folder_write_problem(folder: Path) -> str | None:
    """Why files cannot be written in ``folder`` (made if missing), checked before a long run that writes there at its
    end: a file stands on its path, or this user cannot write in the nearest folder of it that exists; None when
    they can."""
    existing = next(path for path in (folder.absolute(), *folder.absolute().parents) if path.exists())
    if not existing.is_dir():
        return f"{existing} is a file, so the folder {folder} cannot be made"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"this user cannot write in {existing}"
    return None
