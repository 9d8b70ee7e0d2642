"""Where an artifact lives (a local folder or a Hub repo) and how to fetch one file from it."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
)

from .errors import MissingArtifactFileError

logger = logging.getLogger(__name__)
#: the (folder, revision) pairs already warned about: one load builds several locations, a process loads many times
_IGNORED_REVISIONS: set[tuple[str, str]] = set()


def check_folder_or_repo_id(name: str) -> None:
    """Refuse a name that can only be a folder path (``./x``, ``/x``, ``~/x``, ``a/b/c``, a Windows
    path) when no such folder exists: the Hub would only answer that it is not a repo id."""
    path = Path(name).expanduser()
    if path.is_dir():
        return
    looks_like_path = name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1 or path.is_file()
    if looks_like_path:
        what = "is a file, not a folder" if path.is_file() else "does not exist"
        raise MissingArtifactFileError(
            f"No such folder: '{name}' {what}. Pass the folder an artifact was saved to, or a Hub repo id 'org/name'."
        )


@dataclass(frozen=True)
class ArtifactLocation:
    """A local folder, or a Hub repo id plus the usual ``hf_hub_download`` options.

    Args:
        name: a folder path, or a repo id such as ``"org/name"``.
        revision: branch, tag or commit (Hub only; default ``main``).
        cache_dir: Hugging Face cache folder (default ``$HF_HUB_CACHE``).
        force_download: download again even if the file is cached.
        token: Hub token, or None for the configured one.
        local_files_only: use the local cache only (as ``HF_HUB_OFFLINE=1`` does globally).
    """

    name: str
    revision: str | None = None
    cache_dir: str | Path | None = None
    force_download: bool = False
    token: str | bool | None = None
    local_files_only: bool = False

    def __post_init__(self):
        if self.name.startswith("~"):  # a home folder, never a repo id
            object.__setattr__(self, "name", os.path.expanduser(self.name))
        if self.revision is not None and self.is_local:
            self._warn_revision_ignored()

    def _warn_revision_ignored(self) -> None:
        """Say once per folder and revision that a folder is read as it is: huggingface_hub and transformers load it
        and drop ``revision`` without a word, and a pinned revision that does nothing reads as obeyed."""
        key = (str(Path(self.name).resolve()), str(self.revision))
        if key in _IGNORED_REVISIONS:
            return
        _IGNORED_REVISIONS.add(key)
        logger.warning(
            f"revision={self.revision!r} is ignored for the local folder '{self.name}': a revision applies to Hub "
            "repos only, and the folder is read as it is now. Check that revision out into the folder, or pass the "
            "Hub repo id to load it."
        )

    @property
    def is_local(self) -> bool:
        return Path(self.name).is_dir()

    def __str__(self) -> str:
        if self.is_local:
            return f"folder '{self.name}'"
        return f"Hub repo '{self.name}'" + (f" (revision '{self.revision}')" if self.revision else "")

    def resolve(self, filename: str) -> Path:
        """Local path of ``filename``, downloading it into the cache if needed.

        Raises:
            MissingArtifactFileError: the file is not there (or, offline, not cached).
        """
        if self.is_local:
            path = Path(self.name) / filename
            if not path.is_file():
                raise MissingArtifactFileError(f"'{filename}' not found in {self}.")
            return path
        check_folder_or_repo_id(self.name)
        try:
            return Path(
                hf_hub_download(
                    repo_id=self.name,
                    filename=filename,
                    revision=self.revision,
                    cache_dir=self.cache_dir,
                    force_download=self.force_download,
                    token=self.token,
                    local_files_only=self.local_files_only,
                )
            )
        except LocalEntryNotFoundError as error:
            raise MissingArtifactFileError(
                f"'{filename}' of {self} is not in the local Hugging Face cache, and the Hub was not asked "
                "(offline mode, local_files_only=True, or no connection). Download it once online, or check "
                f"HF_HUB_CACHE.{self._no_folder_either()}"
            ) from error
        except GatedRepoError as error:  # a kind of RepositoryNotFoundError: named first
            raise MissingArtifactFileError(
                f"{self} is gated: request access on its Hub page, and pass a token (or log in) of an account "
                "that has it."
            ) from error
        except RepositoryNotFoundError as error:
            raise MissingArtifactFileError(
                f"{self} does not exist on the Hub (or is private and no token was given).{self._no_folder_either()}"
            ) from error
        except EntryNotFoundError as error:
            raise MissingArtifactFileError(f"'{filename}' not found in {self}.") from error

    def _no_folder_either(self) -> str:
        """For a name read as a repo id: it names no local folder either, which is often what was meant."""
        return (
            f" No local folder '{self.name}' exists either (relative to {Path.cwd()}); "
            "if you meant one, check the path."
        )

    def list_files(self) -> list[str]:
        """Files of the folder or repo; for a Hub repo, [] when the Hub cannot be asked."""
        if self.is_local:
            root = Path(self.name)
            return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())
        if self.local_files_only:
            return []
        try:
            return HfApi(token=self.token).list_repo_files(self.name, revision=self.revision)
        except (HfHubHTTPError, OSError):
            return []
