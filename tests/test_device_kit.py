"""scripts/device_kit.sh slim / restore: the device tool sends the tracked tree (64 MiB at most); slim takes results/,
artifacts/ and the shipped checkpoint folders out of what travels and restore puts the index back as it was."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

KIT = Path(__file__).parents[1] / "scripts" / "device_kit.sh"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def kit(repo: Path, verb: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/device_kit.sh", verb], cwd=repo, capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path):
    files = ["hf_adaptive_spec/__init__.py", "hf_adaptive_spec/checkpoints/__init__.py",
             "hf_adaptive_spec/checkpoints/eagle3-x/model.safetensors", "results/README.md",
             "artifacts/data.jsonl", "trainers/eagle3.py"]
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * (3_000_000 if name.endswith(("safetensors", "jsonl")) else 10))
    (tmp_path / "scripts").mkdir()
    shutil.copy(KIT, tmp_path / "scripts" / "device_kit.sh")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tree")
    return tmp_path


def test_slim_leaves_the_bulky_folders_behind_and_restore_puts_the_index_back(repo):
    before = git(repo, "ls-files")
    assert kit(repo, "slim").returncode == 0
    travelling = git(repo, "ls-files").split() + git(repo, "ls-files", "--others", "--exclude-standard").split()
    assert sorted(travelling) == ["hf_adaptive_spec/__init__.py", "hf_adaptive_spec/checkpoints/__init__.py",
                                  "scripts/device_kit.sh", "trainers/eagle3.py"]
    assert "tree: 0.0 MiB" in kit(repo, "size").stdout  # without slim: 5.7 MiB
    assert kit(repo, "slim").returncode == 2  # twice would back up the slimmed index over the real one
    assert kit(repo, "restore").returncode == 0
    assert git(repo, "ls-files") == before
    assert git(repo, "status", "--porcelain") == ""
    assert "device_kit" not in (repo / ".git" / "info" / "exclude").read_text()


def test_restore_refuses_when_a_commit_was_made_while_slim(repo):
    assert kit(repo, "slim").returncode == 0
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "records the folders as deleted")
    refused = kit(repo, "restore")
    assert refused.returncode == 2 and "HEAD moved while slim was in force" in refused.stderr


def test_an_exclude_file_without_a_final_newline_keeps_its_last_pattern(repo):
    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_text("*.log")  # no newline: the block must not be glued to the user's pattern
    assert kit(repo, "slim").returncode == 0 and kit(repo, "restore").returncode == 0
    assert exclude.read_text() == "*.log\n"
    (repo / "results" / "new.md").write_text("a new result")
    assert git(repo, "status", "--porcelain") == "?? results/new.md\n"  # shown, not ignored


def test_restore_refuses_to_drop_what_was_staged_while_slim(repo):
    assert kit(repo, "slim").returncode == 0
    (repo / "trainers" / "eagle3.py").write_text("changed")
    git(repo, "add", "trainers/eagle3.py")
    refused = kit(repo, "restore")
    assert refused.returncode == 2 and "M\ttrainers/eagle3.py" in refused.stderr
    git(repo, "restore", "--staged", "trainers/eagle3.py")
    assert kit(repo, "restore").returncode == 0
    assert git(repo, "status", "--porcelain") == " M trainers/eagle3.py\n"


def test_size_counts_what_travels_when_a_tracked_file_was_deleted(repo):
    (repo / "trainers" / "eagle3.py").unlink()
    sized = kit(repo, "size")
    assert sized.returncode == 0 and "tree: 5.7 MiB" in sized.stdout  # it used to stop there, silently, with 123
