"""Build the Hugging Face cache layout by hand, as a download would leave it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .fake_hub import git_blob_sha1


def add_to_hf_cache(cache_dir: Path, repo_id: str, folder: Path) -> str:
    """Put ``folder``'s files in ``cache_dir`` as model repo ``repo_id`` at ``main``; returns the commit id.

    Layout: ``models--org--name/blobs/<etag>``, ``refs/main`` (the commit id, no newline) and
    ``snapshots/<commit>/<file>`` (``<subfolder>/<file>`` for a file in a subfolder), a relative symlink to its blob.
    """
    repo_dir = cache_dir / f"models--{repo_id.replace('/', '--')}"
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    snapshot = repo_dir / "snapshots" / commit
    (repo_dir / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for file in sorted(path for path in folder.rglob("*") if path.is_file()):  # a subfolder's files too
        data = file.read_bytes()
        blob = repo_dir / "blobs" / git_blob_sha1(data)
        blob.write_bytes(data)
        link = snapshot / file.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    return commit
