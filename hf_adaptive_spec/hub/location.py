"""Where an artifact lives (a local folder or a Hub repo) and how to fetch one file from it."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi, hf_hub_download, try_to_load_from_cache
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


def local_path(path: str | os.PathLike) -> Path:
    """``path`` as a folder on this machine, a leading ``~`` expanded to the home folder: the one rule by which
    loading and saving read a path (a save to ``"~/x"`` and a load of ``"~/x"`` name the same folder)."""
    return Path(path).expanduser()


def check_folder_or_repo_id(name: str) -> None:
    """Refuse a name that can only be a folder path (``./x``, ``/x``, ``~/x``, ``a/b/c``, a Windows
    path) when no such folder exists: the Hub would only answer that it is not a repo id."""
    path = local_path(name)
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
        subfolder: the folder inside the folder or repo that holds the artifact (``hf_hub_download``'s
            ``subfolder``), e.g. ``"policy"`` for ``org/name/policy/config.json``; None: its top.
    """

    name: str
    revision: str | None = None
    cache_dir: str | Path | None = None
    force_download: bool = False
    token: str | bool | None = None
    local_files_only: bool = False
    subfolder: str | None = None

    def __post_init__(self):
        if self.name.startswith("~"):  # a home folder, never a repo id
            object.__setattr__(self, "name", str(local_path(self.name)))
        if self.subfolder is not None:
            object.__setattr__(self, "subfolder", _checked_subfolder(self.subfolder))
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

    @property
    def folder(self) -> Path:
        """The local folder holding the artifact (``name``, then ``subfolder`` in it); for a local location only."""
        return Path(self.name) / self.subfolder if self.subfolder else Path(self.name)

    def repo_path(self, filename: str) -> str:
        """``filename``'s path in the repo (``subfolder/filename``), as huggingface_hub's cache and listings name it."""
        return f"{self.subfolder}/{filename}" if self.subfolder else filename

    def __str__(self) -> str:
        inside = f" (subfolder '{self.subfolder}')" if self.subfolder else ""
        if self.is_local:
            return f"folder '{self.name}'{inside}"
        return f"Hub repo '{self.name}'" + (f" (revision '{self.revision}')" if self.revision else "") + inside

    def hub_options(self) -> dict[str, object]:
        """The ``hf_hub_download`` options besides the repo, file and subfolder (``revision``, ``cache_dir``...)."""
        return {"revision": self.revision, "cache_dir": self.cache_dir, "force_download": self.force_download,
                "token": self.token, "local_files_only": self.local_files_only}

    def cache_hint(self) -> str:
        """Where this location's cache is, for a message saying a file is not there: the ``cache_dir`` given, else
        ``HF_HUB_CACHE`` (which sets the default)."""
        return f"cache_dir='{self.cache_dir}'" if self.cache_dir is not None else "HF_HUB_CACHE"

    def cached_path(self, filename: str) -> Path | None:
        """``filename``'s local path when the folder holds it or the local cache does (looked up without a request),
        else None."""
        if self.is_local:
            path = self.folder / filename
            return path if path.is_file() else None
        cached = try_to_load_from_cache(
            self.name, self.repo_path(filename), cache_dir=self.cache_dir, revision=self.revision
        )
        return Path(cached) if isinstance(cached, str) else None

    def resolve(self, filename: str) -> Path:
        """Local path of ``filename``, downloading it into the cache if needed.

        Raises:
            MissingArtifactFileError: the file is not there (or, offline, not cached).
        """
        if self.is_local:
            path = self.folder / filename
            if not path.is_file():
                raise MissingArtifactFileError(f"'{filename}' not found in {self}.")
            return path
        check_folder_or_repo_id(self.name)
        try:
            return Path(
                hf_hub_download(
                    repo_id=self.name,
                    filename=filename,
                    subfolder=self.subfolder,
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
                f"{self.cache_hint()}.{self._no_folder_either()}"
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
            root = self.folder
            return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())
        if self.local_files_only:
            return []
        try:
            files = HfApi(token=self.token).list_repo_files(self.name, revision=self.revision)
        except (HfHubHTTPError, OSError):
            return []
        prefix = self.repo_path("")
        return [name.removeprefix(prefix) for name in files if name.startswith(prefix)]


def _checked_subfolder(subfolder: object) -> str | None:
    """``subfolder`` as a path inside a folder or repo (slashes at its ends dropped; "" is the top: None); one that
    leaves it (absolute, or with ``..``) is refused."""
    if not isinstance(subfolder, (str, os.PathLike)):
        raise TypeError(f"subfolder is a folder inside the folder or repo, e.g. 'policy'; got {subfolder!r}.")
    text = os.fspath(subfolder).replace("\\", "/").strip("/")
    if Path(os.fspath(subfolder)).is_absolute() or ".." in text.split("/"):
        raise ValueError(
            f"subfolder={os.fspath(subfolder)!r} leaves the folder or repo: pass a folder inside it, e.g. 'policy', "
            "or pass the folder's own path without subfolder."
        )
    return text or None
