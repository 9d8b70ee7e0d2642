"""``hf-adaptive-spec packages``: lists the ahead-of-time packages by last use, and deletes the unused ones only when
told to (the folder only grows: each changed model or setting builds another package, about 330 MB for SmolLM2)."""

from __future__ import annotations

import json
import os
import time

import pytest

from hf_adaptive_spec.cli import main as cli_main
from hf_adaptive_spec.generation.packages_cli import main

DAY = 86400


def _package(folder, name: str, days_unused: float, described: dict | None = None, size: int = 1000):
    path = folder / f"{name}.pt2"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    if described is not None:
        path.with_suffix(".json").write_text(json.dumps(described))
    then = time.time() - days_unused * DAY
    os.utime(path, (then, then))
    return path


OLD, RECENT, UNDESCRIBED, KILLED, IN_PROGRESS = "0" * 32, "1" * 32, "2" * 32, "3" * 32 + "-123-4", "4" * 32 + "-9-9"


@pytest.fixture
def folder(tmp_path):
    built = {"model": "SmolLM2", "dtype": "bfloat16", "built": "2026-11-01T00:00:00Z"}
    _package(tmp_path, OLD, 40, {**built, "key": "(16, 512)"}, size=3_000_000)
    _package(tmp_path, RECENT, 1, {**built, "key": "(8, 512)"})
    _package(tmp_path, UNDESCRIBED, 39)
    _package(tmp_path / "building", KILLED, 38)
    _package(tmp_path / "building", IN_PROGRESS, 0.001)
    _package(tmp_path, "my_exported_model", 60, {"mine": True})  # torch.export.save's, in a shared folder: not ours
    return tmp_path


def test_the_listing_names_each_package_least_recently_used_first(folder, capsys):
    assert cli_main(["packages", "--dir", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[5] for line in lines[:-1]] == [f"{OLD}.pt2", f"{UNDESCRIBED}.pt2", f"{KILLED}.pt2",
                                                         f"{RECENT}.pt2", f"{IN_PROGRESS}.pt2"]
    text = "\n".join(lines)
    assert f"3.0 MB  unused   40.0 days  {OLD}.pt2  SmolLM2 (bfloat16), key (16, 512)" in text
    assert f"{UNDESCRIBED}.pt2  built before packages were described (loads before 2026-12-06 did not" in text
    assert f"{KILLED}.pt2  an unfinished build (its process was killed)" in text
    assert lines[-1] == "5 files, 3.0 MB" and "my_exported_model" not in text


def test_unused_packages_are_deleted_only_with_yes(folder, capsys):
    """Files the engine did not name (another .pt2 and its .json in a shared folder) are never deleted."""
    assert main(["--dir", str(folder), "--delete-unused-days", "30"]) == 0
    out = capsys.readouterr().out
    assert "not deleted: pass --yes" in out and OLD in out and RECENT not in out
    assert (folder / f"{OLD}.pt2").exists()
    assert main(["--dir", str(folder), "--delete-unused-days", "30", "--yes"]) == 0
    left = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    assert left == sorted([f"building/{IN_PROGRESS}.pt2", "my_exported_model.json", "my_exported_model.pt2",
                           f"{RECENT}.json", f"{RECENT}.pt2"])  # sidecars go with their package
    assert main(["--dir", str(folder), "--delete-unused-days", "0", "--yes"]) == 0  # a build may be in progress
    assert (folder / "building" / f"{IN_PROGRESS}.pt2").exists() and not (folder / f"{RECENT}.pt2").exists()
    assert (folder / "my_exported_model.pt2").exists()


@pytest.mark.parametrize("argv, message", [
    (["--delete-unused-days", "-1"], "--delete-unused-days must be a number of days >= 0, got -1.0"),
    (["--delete-unused-days", "nan"], "--delete-unused-days must be a number of days >= 0, got nan"),
    (["--yes"], "--yes confirms --delete-unused-days N: pass the days too"),
])
def test_bad_options_are_refused_by_name(folder, capsys, argv, message):
    with pytest.raises(SystemExit):
        main(["--dir", str(folder), *argv])
    assert message in capsys.readouterr().err


def test_a_missing_folder_is_refused_naming_it(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--dir", str(tmp_path / "none")])
    assert f"no packages folder at {tmp_path / 'none'}" in capsys.readouterr().err


def _files_left(folder) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())


def test_an_unreadable_folder_is_refused_naming_the_permission(folder, capsys, monkeypatch):
    """Path.glob lists a folder it cannot read as empty: the listing said '0 files' of a shared cache owned by another
    user (tests run as root, who reads every folder: the refusal of the system is simulated)."""
    real_scandir, real_listdir = os.scandir, os.listdir

    def refused(real):
        def call(path="."):
            if os.fspath(path) == str(folder):
                raise PermissionError(13, "Permission denied", str(folder))
            return real(path)
        return call

    monkeypatch.setattr(os, "scandir", refused(real_scandir))
    monkeypatch.setattr(os, "listdir", refused(real_listdir))
    for argv in ([], ["--delete-unused-days", "30", "--yes"]):
        with pytest.raises(SystemExit):
            main(["--dir", str(folder), *argv])
        captured = capsys.readouterr()
        assert f"cannot list the packages folder {folder} (Permission denied)" in captured.err
        assert "read and search permission" in captured.err and "0 files" not in captured.out
    assert (folder / f"{OLD}.pt2").exists()


def test_files_that_cannot_be_deleted_are_named_and_the_others_deleted(folder, capsys, monkeypatch):
    """A read-only folder raised a raw PermissionError at its first file, and the rest were left unlisted."""
    real_unlink = type(folder).unlink

    def unlink(path, missing_ok=False):
        if path.name in (f"{OLD}.pt2", f"{KILLED}.pt2"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(type(folder), "unlink", unlink)
    assert main(["--dir", str(folder), "--delete-unused-days", "30", "--yes"]) == 1
    out = capsys.readouterr().out
    assert f"could not delete {folder / OLD}.pt2: Permission denied" in out
    assert f"could not delete {folder / 'building' / KILLED}.pt2: Permission denied" in out
    assert "deleted 1 files" in out and "2 files could not be deleted: deleting needs write permission" in out
    assert not (folder / f"{UNDESCRIBED}.pt2").exists() and (folder / f"{OLD}.pt2").exists()


def test_sidecars_unreadable_orphaned_or_half_written_are_named_and_pruned(tmp_path, capsys):
    """A damaged sidecar was listed as a package 'built before packages were described' and left behind by a delete;
    a sidecar whose package was deleted by hand, and a sidecar's temporary file a killed build left, were never
    listed nor deleted. Files the engine did not name are never touched."""
    truncated, listed, orphan, young_orphan = "5" * 32, "6" * 32, "7" * 32, "8" * 32
    _package(tmp_path, truncated, 40).with_suffix(".json").write_text('{"key": "(8, ')
    _package(tmp_path, listed, 40).with_suffix(".json").write_text("[1, 2]")
    partials = [f"{orphan}.json.partial", f"{orphan}.json.123-0a1b2c3d.partial"]
    for name, days in [(f"{orphan}.json", 40), (f"{young_orphan}.json", 0.001), *((name, 40) for name in partials),
                       ("notes.json", 40), ("notes.json.partial", 40)]:
        (tmp_path / name).write_text("{}")
        then = time.time() - days * DAY
        os.utime(tmp_path / name, (then, then))
    assert main(["--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{truncated}.pt2  its description (sidecar) is unreadable" in out
    assert f"{listed}.pt2  its description (sidecar) is unreadable" in out
    assert f"{orphan}.json  a description (sidecar) whose package is gone" in out
    assert f"{young_orphan}.json  a description (sidecar) whose package is gone (or is being built)" in out
    assert all(f"{name}  a sidecar left half-written" in out for name in partials) and "notes" not in out
    assert main(["--dir", str(tmp_path), "--delete-unused-days", "30", "--yes"]) == 0
    assert _files_left(tmp_path) == sorted([f"{young_orphan}.json", "notes.json", "notes.json.partial"])


def test_the_listing_shortens_keys_and_names_young_builds_and_unnamed_models(tmp_path, capsys):
    """A key names every cache tensor's layout (thousands of characters for SmolLM2); a build written to within the
    hour may be running in another process; a model loaded from memory has an empty name."""
    long_key = "(" + ", ".join(["('float32', (1, 4, 512, 16), (32768, 8192, 16, 1))"] * 60) + ")"
    _package(tmp_path, OLD, 2, {"model": "", "dtype": "float32", "key": long_key, "built": "2026-12-01T00:00:00Z"})
    _package(tmp_path / "building", IN_PROGRESS, 0.001)
    assert main(["--dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(f"{OLD}.pt2  (unnamed) (float32), key {long_key[:120]}…") and len(lines[0]) < 250
    assert lines[1].endswith(f"{IN_PROGRESS}.pt2  a build in progress, or killed")


def test_an_empty_dir_is_refused_not_read_as_the_current_folder(capsys):
    with pytest.raises(SystemExit):
        main(["--dir", ""])
    assert "--dir is empty (it would be the current folder)" in capsys.readouterr().err
