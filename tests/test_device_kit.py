"""scripts/device_kit.sh slim / restore: the device tool sends the tracked tree (64 MiB at most); slim takes results/,
artifacts/ and the shipped checkpoint folders out of what travels and restore puts the index back as it was. And the
GPU stages artifacts/README.md gives, run through scripts/device_compare.sh with a stand-in for the trainer."""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
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


REPO = KIT.parents[1]
#: what the device tool gives back from $OUT (its README's limits)
RETURNED_FILES, RETURNED_FILE_BYTES, CALL_LIMIT_SECONDS = 8, 16 * 2**20, 600

# Stands in for trainers/eagle3.py in scripts/device_compare.sh: parses the arguments the driver passes as the trainer
# does (a GPU recipe's bf16/tf32 turned off, as a CPU has neither), checks the time budget's schedule, records what
# it parsed, and leaves a drafter as large as the real one would be (the starting drafter plus its added layers).
FAKE_TRAINER = '''
import json, os, sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from hf_adaptive_spec.training.base import check_renamed_arguments
from hf_adaptive_spec.training.eagle3.script import STABLE_POINT_DIR, make_parser
from hf_adaptive_spec.training.time_budget import scheduler_shape, time_budget

parser = make_parser()
check_renamed_arguments(parser, sys.argv[1:])
script_args, args = parser.parse_args_and_config(args=[*sys.argv[1:], "--bf16", "false", "--tf32", "false"])
time_budget(script_args.max_train_minutes, script_args.decay_ratio, args)
parsed = {**vars(script_args), **{k: getattr(v, "value", v) for k, v in args.to_dict().items()}}
with open(os.environ["FAKE_CALLS"], "a", encoding="utf-8") as calls:
    calls.write(json.dumps({"argv": sys.argv[1:], "parsed": parsed}, default=str) + "\\n")
start = Path(script_args.init_from)
config = json.loads((start / "config.json").read_text())
h, i, kv = config["hidden_size"], config["intermediate_size"], config["num_key_value_heads"] * config["head_dim"]
per_layer = 2 * (2 * h * h + 2 * kv * h + 3 * h * i + 2 * h)  # a plain Llama layer in bfloat16
size = (start / "model.safetensors").stat().st_size + per_layer * ((args.draft_num_hidden_layers or 1) - 1)
folders = [Path(args.output_dir)]
if scheduler_shape(args) == "warmup_stable_decay":
    folders.append(folders[0] / STABLE_POINT_DIR)
for folder in folders:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"weight": torch.zeros(size // 2)}, str(folder / "model.safetensors"))  # float32: export halves it
    (folder / "heldout_curve.jsonl").write_text("{}\\n")
'''


def readme_device_compare_commands() -> list[dict[str, str]]:
    """The environment each ``bash scripts/device_compare.sh`` command of artifacts/README.md's bash blocks sets."""
    commands = []
    text = (REPO / "artifacts" / "README.md").read_text(encoding="utf-8")
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            if "scripts/device_compare.sh" in line:
                words = shlex.split(line)
                commands.append(dict(word.split("=", 1) for word in words[: words.index("bash")]))
    return commands


def as_given(value: str, parsed):
    """``value`` from a command line in the type the parser gave it."""
    if isinstance(parsed, bool):
        return value.lower() in ("true", "1", "yes")
    return type(parsed)(value) if parsed is not None else value


@pytest.mark.parametrize("command", readme_device_compare_commands(), ids=lambda env: env["VARIANTS"].split(":")[0])
def test_the_readme_s_device_compare_commands_reach_the_trainer_and_come_back_whole(command, tmp_path):
    """Each GPU stage artifacts/README.md gives, run by scripts/device_compare.sh with a stand-in trainer: every flag
    it passes is one trainers/eagle3.py parses, with the value given, the schedule one the time budget runs, the
    starting drafter the one device_kit.sh packs, and what comes back fits the device tool (a two-layer drafter
    split in 15 MiB parts took three, and the stage-19 command's ninth file stayed on the machine)."""
    assert set(command) >= {"RECIPE", "INIT", "DATA", "CALL_SECONDS", "VARIANTS"}
    assert int(command["CALL_SECONDS"]) + 30 <= CALL_LIMIT_SECONDS  # the call's timeout_s: S + 30
    assert command["DATA"] == "sharegpt_smollm2_target14"  # the one set device_kit.sh pack makes
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for script in ("device_env.sh", "device_compare.sh"):
        shutil.copy(REPO / "scripts" / script, repo / "scripts" / script)
    (repo / "trainers").symlink_to(REPO / "trainers")
    xfer = repo / ".xfer" / "c"  # what pack puts in .xfer/c: the starting drafter, the held-out set, the data
    shutil.copytree(REPO / "artifacts" / command["INIT"], xfer / command["INIT"])
    (xfer / "eagle3_heldout_regenerated.jsonl").write_text("{}\n")
    (xfer / f"{command['DATA']}.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    (tmp_path / "fake_trainer.py").write_text(FAKE_TRAINER)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = trainers/eagle3.py ]; then shift; exec {sys.executable} '
                      f'{tmp_path / "fake_trainer.py"} "$@"; fi\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    out, calls = tmp_path / "out", tmp_path / "calls.jsonl"
    env = {**os.environ, **command, "XFER": ".xfer/c", "PY": str(python), "SKIP_WHEELS": "1", "DEVICE": "cpu",
           "STAGE": str(tmp_path / "stage"), "OUT": str(out), "FAKE_CALLS": str(calls)}
    done = subprocess.run(["bash", "scripts/device_compare.sh"], cwd=repo, env=env, capture_output=True, text=True)
    log = (out / "train.log").read_text()
    assert done.returncode == 0 and "Traceback" not in log, done.stdout + done.stderr + log

    variants = [variant.split(":", 1) for variant in command["VARIANTS"].split("|")]
    records = [json.loads(line) for line in calls.read_text().splitlines()]
    assert len(records) == len(variants), log
    for (name, extra), record in zip(variants, records):
        parsed = record["parsed"]
        assert parsed["output_dir"] == f"artifacts/{name}" and parsed["init_from"] == f"artifacts/{command['INIT']}"
        assert 0 < parsed["max_train_minutes"] * 60 < int(command["CALL_SECONDS"])
        given = shlex.split(extra) + shlex.split(command.get("TRAIN_EXTRA_ALL", ""))
        for flag, value in zip(given[::2], given[1::2]):
            key = flag.removeprefix("--").replace("-", "_")
            assert key in parsed and parsed[key] == as_given(value, parsed[key]), (flag, value, parsed.get(key))

    returned = sorted(path for path in out.rglob("*") if path.is_file())
    assert len(returned) <= RETURNED_FILES, [path.name for path in returned]
    assert all(path.stat().st_size <= RETURNED_FILE_BYTES for path in returned)
    for name, _ in variants:
        assert (out / f"{name}_folder.tgz").is_file() and list(out.glob(f"{name}.safetensors.part*"))
