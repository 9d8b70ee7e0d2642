"""``hf-adaptive-spec packages``: list the ahead-of-time packages on disk, and delete those left unused.

A package's name is a digest of everything it depends on, so a changed model, setting or library version builds
another and leaves the old one on disk (about 330 MB for SmolLM2 in bfloat16). Each load marks a package used (its
modification time), and each build writes a sidecar JSON naming the model, dtype and shapes it was built for: this
command lists them by last use and deletes those unused for ``--delete-unused-days`` days, with ``--yes``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.packaged import (
    BUILD_NAME,
    BUILDING_DIR,
    DESCRIPTION_SUFFIX,
    PACKAGE_NAME,
    PARTIAL_SIDECAR_NAME,
    SIDECAR_NAME,
    default_package_dir,
)

SECONDS_PER_DAY = 86400.0
#: an unfinished build (or sidecar) written to this recently may be in progress in another process: never deleted
BUILD_IN_PROGRESS_SECONDS = 3600.0
#: the characters of a package's key the listing shows (a key names every cache tensor's layout: thousands of them)
KEY_SHOWN = 120

#: what a file in the packages folder is: a package, a build in ``building``, a sidecar without its package, or a
#: sidecar's temporary file
PACKAGE, BUILD, ORPHAN_SIDECAR, PARTIAL_SIDECAR = "package", "build", "orphan sidecar", "partial sidecar"


class PackagesFolderError(Exception):
    """The packages folder cannot be listed (the message names the folder and the fix)."""


@dataclass
class PackageFile:
    """One file the engine wrote in the packages folder: a package, or what a build left (a build a killed process
    left half-written, a sidecar whose package is gone, a sidecar's unfinished write)."""

    path: Path
    size: int
    last_used: float  # seconds since the epoch (the file's modification time)
    kind: str = PACKAGE
    description: dict | None = None  # a package's sidecar; None when it has none, or one that cannot be read
    sidecar_unreadable: bool = False

    def days_unused(self, now: float) -> float:
        return (now - self.last_used) / SECONDS_PER_DAY

    def may_be_in_progress(self, now: float) -> bool:
        """Whether a build may be writing it now (what a build leaves, written to within the last hour)."""
        return self.kind != PACKAGE and now - self.last_used < BUILD_IN_PROGRESS_SECONDS

    def summary(self, now: float) -> str:
        young = self.may_be_in_progress(now)
        if self.kind == BUILD:
            return "a build in progress, or killed" if young else "an unfinished build (its process was killed)"
        if self.kind == ORPHAN_SIDECAR:
            return "a description (sidecar) whose package is gone" + (" (or is being built)" if young else "")
        if self.kind == PARTIAL_SIDECAR:
            return "a sidecar being written, or left by a killed process" if young else "a sidecar left half-written"
        if self.sidecar_unreadable:
            return "its description (sidecar) is unreadable"
        if self.description is None:
            return "built before packages were described (loads before 2026-12-06 did not mark it used)"
        described = self.description
        key = str(described.get("key", "?"))
        key = key if len(key) <= KEY_SHOWN else key[:KEY_SHOWN] + "…"
        return f"{described.get('model') or '(unnamed)'} ({described.get('dtype', '?')}), key {key}"


def scan(directory: Path) -> list[PackageFile]:
    """Every package in ``directory``, every unfinished build in its ``building`` folder and every sidecar left
    without its package or half-written, least recently used first: files named as the engine names them (a
    digest), never another ``.pt2`` (``torch.export.save``'s) or ``.json`` that shares the folder.
    PackagesFolderError when a folder cannot be listed (``Path.glob`` lists an unreadable one as empty)."""
    names = _names_in(directory)
    kinds = {PACKAGE: [name for name in names if PACKAGE_NAME.fullmatch(name)],
             ORPHAN_SIDECAR: [name for name in names if SIDECAR_NAME.fullmatch(name)
                              and Path(name).with_suffix(".pt2").name not in names],
             PARTIAL_SIDECAR: [name for name in names if PARTIAL_SIDECAR_NAME.fullmatch(name)]}
    paths = [(directory / name, kind) for kind, kind_names in kinds.items() for name in kind_names]
    building = directory / BUILDING_DIR
    paths += [(building / name, BUILD) for name in _names_in(building) if BUILD_NAME.fullmatch(name)]
    files = []
    for path, kind in paths:
        try:
            stat = path.stat()
        except FileNotFoundError:  # deleted by another process since the listing
            continue
        description, unreadable = _description(path) if kind == PACKAGE else (None, False)
        files.append(PackageFile(path, stat.st_size, stat.st_mtime, kind, description, unreadable))
    return sorted(files, key=lambda file: file.last_used)


def _names_in(folder: Path) -> set[str]:
    """The names of the files in ``folder`` (none when it does not exist); PackagesFolderError when it cannot be
    read."""
    try:
        return set(os.listdir(folder))
    except FileNotFoundError:
        return set()
    except OSError as error:
        raise PackagesFolderError(
            f"cannot list the packages folder {folder} ({error.strerror or error}): it needs read and search "
            f"permission for this user (see ls -ld {folder}); run as its owner, or pass another folder as --dir"
        ) from error


def _description(path: Path) -> tuple[dict | None, bool]:
    """``(the sidecar write_description wrote beside path, whether a sidecar is there but unreadable)``; a missing
    sidecar is ``(None, False)``: a package built before sidecars were written."""
    sidecar = path.with_suffix(DESCRIPTION_SUFFIX)
    try:
        described = json.loads(sidecar.read_text())
    except FileNotFoundError:
        return None, False
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None, True
    if isinstance(described, dict) and {"key", "built"} <= described.keys():
        return described, False
    return None, True


def delete(file: PackageFile) -> None:
    """Delete the file, and a package's sidecar (a process that loaded it keeps running: a loaded package is
    unpacked). OSError when one cannot be deleted."""
    file.path.unlink(missing_ok=True)
    if file.kind == PACKAGE:
        file.path.with_suffix(DESCRIPTION_SUFFIX).unlink(missing_ok=True)


def delete_all(files: list[PackageFile], directory: Path) -> int:
    """Delete ``files``, each it can (one that cannot be deleted is named, and the others are still deleted); the
    exit status: 1 when any could not be deleted."""
    failed = []
    for file in files:
        try:
            delete(file)
        except OSError as error:
            failed.append(file)
            print(f"could not delete {file.path}: {error.strerror or error}")
    print(f"deleted {len(files) - len(failed)} files from {directory}")
    if failed:
        print(f"{len(failed)} files could not be deleted: deleting needs write permission on {directory} and its "
              f"{BUILDING_DIR} folder (see ls -ld {directory}); run as its owner")
    return 1 if failed else 0


def listing(files: list[PackageFile], now: float) -> list[str]:
    """One line per file, then the total."""
    lines = [f"{file.size / 1e6:9.1f} MB  unused {file.days_unused(now):6.1f} days  {file.path.name}  "
             f"{file.summary(now)}" for file in files]
    return [*lines, f"{len(files)} files, {sum(file.size for file in files) / 1e6:.1f} MB"]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-adaptive-spec packages", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=None,
                        help=f"the packages folder (default: $HF_ADAPTIVE_SPEC_PACKAGES, else {default_package_dir()})")
    parser.add_argument("--delete-unused-days", type=float, default=None,
                        help="delete the packages not loaded for this many days (and what builds left: a build a "
                             "killed process left, a sidecar without its package; untouched for an hour or more)")
    parser.add_argument("--yes", action="store_true", help="with --delete-unused-days: delete (without it: only list)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.delete_unused_days is not None and not args.delete_unused_days >= 0:
        parser.error(f"--delete-unused-days must be a number of days >= 0, got {args.delete_unused_days}")
    if args.yes and args.delete_unused_days is None:
        parser.error("--yes confirms --delete-unused-days N: pass the days too")
    if args.dir is not None and not args.dir.strip():
        parser.error("--dir is empty (it would be the current folder): pass the packages folder, or leave --dir out "
                     "for the default")
    directory = (Path(args.dir) if args.dir is not None else default_package_dir()).expanduser()
    if not directory.is_dir():
        parser.error(f"no packages folder at {directory} (set by --dir, else $HF_ADAPTIVE_SPEC_PACKAGES)")
    now = time.time()
    try:
        files = scan(directory)
    except PackagesFolderError as error:
        parser.error(str(error))
    if args.delete_unused_days is None:
        print("\n".join(listing(files, now)))
        return 0
    unused = [file for file in files
              if file.days_unused(now) >= args.delete_unused_days and not file.may_be_in_progress(now)]
    print("\n".join(listing(unused, now)))
    if not args.yes:
        print(f"not deleted: pass --yes to delete these (unused for {args.delete_unused_days:g} days or more)")
        return 0
    return delete_all(unused, directory)
