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
