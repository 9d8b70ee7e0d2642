"""Writing a small file whole or not at all; giving written files the mode the umask gives."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it: a reader (or a crash) never meets half a
    file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


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
