"""``hf-adaptive-spec packages``: list the ahead-of-time packages on disk, and delete those left unused.

A package's name is a digest of everything it depends on, so a changed model, setting or library version builds
another and leaves the old one on disk (about 330 MB for SmolLM2 in bfloat16). Each load marks a package used (its
modification time), and each build writes a sidecar JSON naming the model, dtype and shapes it was built for: this
command lists them by last use and deletes those unused for ``--delete-unused-days`` days, with ``--yes``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.packaged import BUILD_NAME, BUILDING_DIR, DESCRIPTION_SUFFIX, PACKAGE_NAME, default_package_dir

SECONDS_PER_DAY = 86400.0
#: an unfinished build written to this recently may be in progress in another process: never deleted
BUILD_IN_PROGRESS_SECONDS = 3600.0


@dataclass
class PackageFile:
    """One package (or a build a killed process left half-written) in the folder."""

    path: Path
    size: int
    last_used: float  # seconds since the epoch (the file's modification time)
    description: dict | None  # the sidecar's, None for packages built before sidecars were written

    @property
    def unfinished(self) -> bool:
        return self.path.parent.name == BUILDING_DIR

    def days_unused(self, now: float) -> float:
        return (now - self.last_used) / SECONDS_PER_DAY

    def summary(self) -> str:
        if self.unfinished:
            return "an unfinished build (its process was killed)"
        if self.description is None:
            return "built before packages were described (loads before 2026-12-06 did not mark it used)"
        described = self.description
        return f"{described.get('model', '?')} ({described.get('dtype', '?')}), key {described.get('key', '?')}"


def scan(directory: Path) -> list[PackageFile]:
    """Every package in ``directory`` and every unfinished build in its ``building`` folder, least recently used
    first: files named as the engine names them (a digest), never another ``.pt2`` (``torch.export.save``'s) that
    shares the folder."""
    paths = [*(path for path in directory.glob("*.pt2") if PACKAGE_NAME.fullmatch(path.name)),
             *(path for path in (directory / BUILDING_DIR).glob("*.pt2") if BUILD_NAME.fullmatch(path.name))]
    files = []
    for path in paths:
        try:
            stat = path.stat()
        except FileNotFoundError:  # deleted by another process since the listing
            continue
        files.append(PackageFile(path, stat.st_size, stat.st_mtime, _description(path)))
    return sorted(files, key=lambda file: file.last_used)


def _description(path: Path) -> dict | None:
    """The sidecar :func:`~hf_adaptive_spec.core.packaged.write_description` wrote beside ``path``, else None."""
    sidecar = path.with_suffix(DESCRIPTION_SUFFIX)
    try:
        described = json.loads(sidecar.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return described if isinstance(described, dict) and {"key", "built"} <= described.keys() else None


def delete(file: PackageFile) -> None:
    """Delete a package and its sidecar (a process that loaded it keeps running: a loaded package is unpacked)."""
    file.path.unlink(missing_ok=True)
    if file.description is not None:
        file.path.with_suffix(DESCRIPTION_SUFFIX).unlink(missing_ok=True)


def listing(files: list[PackageFile], now: float) -> list[str]:
    """One line per package, then the total."""
    lines = [f"{file.size / 1e6:9.1f} MB  unused {file.days_unused(now):6.1f} days  {file.path.name}  {file.summary()}"
             for file in files]
    return [*lines, f"{len(files)} files, {sum(file.size for file in files) / 1e6:.1f} MB"]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-adaptive-spec packages", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=None,
                        help=f"the packages folder (default: $HF_ADAPTIVE_SPEC_PACKAGES, else {default_package_dir()})")
    parser.add_argument("--delete-unused-days", type=float, default=None,
                        help="delete the packages not loaded for this many days (and builds a killed process left, "
                             "untouched for an hour or more)")
    parser.add_argument("--yes", action="store_true", help="with --delete-unused-days: delete (without it: only list)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.delete_unused_days is not None and not args.delete_unused_days >= 0:
        parser.error(f"--delete-unused-days must be a number of days >= 0, got {args.delete_unused_days}")
    if args.yes and args.delete_unused_days is None:
        parser.error("--yes confirms --delete-unused-days N: pass the days too")
    directory = (args.dir or default_package_dir()).expanduser()
    if not directory.is_dir():
        parser.error(f"no packages folder at {directory} (set by --dir, else $HF_ADAPTIVE_SPEC_PACKAGES)")
    now = time.time()
    files = scan(directory)
    if args.delete_unused_days is None:
        print("\n".join(listing(files, now)))
        return 0
    unused = [file for file in files if file.days_unused(now) >= args.delete_unused_days
              and not (file.unfinished and now - file.last_used < BUILD_IN_PROGRESS_SECONDS)]
    print("\n".join(listing(unused, now)))
    if not args.yes:
        print(f"not deleted: pass --yes to delete these (unused for {args.delete_unused_days:g} days or more)")
        return 0
    for file in unused:
        delete(file)
    print(f"deleted {len(unused)} files from {directory}")
    return 0
