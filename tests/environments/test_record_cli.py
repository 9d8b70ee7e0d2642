"""``hf-adaptive-spec record`` with tiny models: shards, resuming, the profile and the training prompts."""

from __future__ import annotations

import argparse
import json

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.environments import ReplayRecording, load_recording, record_replay
from hf_adaptive_spec.environments import cli
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training_data.leakage import eval_question_digests, question_digest

torch.set_num_threads(1)

PROMPTS = [prompt(6 + i, seed=30 + i) for i in range(5)]
TREE = ["--depth", "3", "--top-k", "2", "--total-tokens", "5", "--max-new-tokens", "10"]


def _eagle3(target):
    torch.manual_seed(1)
    return hfas.Eagle3Drafter(Eagle3DraftModel.from_target(target, initializer_range=0.3))


def _rows(trees):
    return [(tree.context_length, tree.tokens, tree.target_next) for tree in trees]


@pytest.fixture
def tiny_cli(monkeypatch):
    """The command with a tiny target, a tiny EAGLE-3 drafter and random prompts."""
    target = tiny_model("llama")
    monkeypatch.setattr(cli, "load_target", lambda: (target, None))
    monkeypatch.setattr(cli, "load_drafter", lambda model, checkpoint: _eagle3(model))
    monkeypatch.setattr(cli, "load_prompts", lambda tokenizer, a: PROMPTS[a.start : a.start + a.num_prompts])
    return target


def test_record_writes_shards_that_load_as_one_recording(tiny_cli, tmp_path):
    output, profile = tmp_path / "rec", tmp_path / "profile.json"
    argv = ["--output", str(output), "--num-prompts", "3", "--shard-size", "2", *TREE]
    assert cli.main(argv + ["--profile", str(profile), "--profile-context-length", "16", "--profile-repeats", "1"]) == 0
    assert sorted(p.name for p in output.iterdir()) == [
        "record_args.json", "shard-000000-000002", "shard-000002-000003"
    ]
    recording = load_recording(output)
    drafter = _eagle3(tiny_cli)
    expected = record_replay(tiny_cli, drafter, PROMPTS[:3], TreeConfig(3, 2, 5), 10, drafter.feature_layers)
    assert recording.feature_layers == expected.feature_layers != ()  # the drafter's EAGLE-3 layers by default
    for got, want in zip(recording.prompts, expected.prompts, strict=True):
        assert _rows(got) == _rows(want)
        for tree, reference in zip(got, want):
            for layer in recording.feature_layers:
                torch.testing.assert_close(tree.features[layer], reference.features[layer].float())
    measured = HardwareProfile.load(profile)
    assert measured.draft_step_seconds > 0 and 5 in measured.verify_tokens

    shards = {p.name: p.stat().st_mtime_ns for p in output.glob("shard-*")}
    assert cli.main(argv) == 0  # resumed: nothing to do
    assert {p.name: p.stat().st_mtime_ns for p in output.glob("shard-*")} == shards
    assert cli.main(["--output", str(output), "--start", "3", "--num-prompts", "2", *TREE]) == 0
    assert len(load_recording(output).prompts) == 5


def test_record_refuses_to_mix_settings(tiny_cli, tmp_path, capsys):
    output = str(tmp_path / "rec")
    assert cli.main(["--output", output, "--num-prompts", "1", *TREE]) == 0
    assert cli.main(["--output", output, "--num-prompts", "1", "--seed", "1", *TREE]) == 2
    assert "seed differ" in capsys.readouterr().err


def test_overlapping_shards_and_mixed_recordings_are_refused(tiny_cli, tmp_path):
    output = tmp_path / "rec"
    assert cli.main(["--output", str(output), "--num-prompts", "2", "--shard-size", "2", *TREE]) == 0
    assert cli.main(["--output", str(output), "--start", "1", "--num-prompts", "1", *TREE]) == 2  # overlaps 0-2
    (output / "shard-000000-000002").rename(output / "shard-000001-000003")
    (output / "shard-000000-000002").mkdir()
    ReplayRecording.load(output / "shard-000001-000003").save(output / "shard-000000-000002")
    with pytest.raises(ValueError, match="overlap"):
        load_recording(output)
    recording = ReplayRecording.load(output / "shard-000000-000002")
    with pytest.raises(ValueError, match="different settings"):
        other = record_replay(tiny_cli, _eagle3(tiny_cli), PROMPTS[:1], TreeConfig(2, 2, 5), 10)
        ReplayRecording.concatenate([recording, other])


def test_humaneval_prompts_leave_out_the_evaluated_ones():
    args = argparse.Namespace(
        prompts="humaneval", prompts_file=None, start=0, num_prompts=500, seed=0, eval_data_dir=None, sharegpt_file=None
    )
    conversations = cli.training_conversations(args)
    assert len(conversations) == 164 - 80  # EAGLE's HumanEval evaluation set holds 80 of the 164
    questions = eval_question_digests()
    assert not any(question_digest(c.messages[0]["content"]) in questions for c in conversations)
    later = cli.training_conversations(argparse.Namespace(**{**vars(args), "start": 10, "num_prompts": 5}))
    assert [c.id for c in later] == [c.id for c in conversations[10:15]]


def test_prompts_file_records_are_the_prompts_with_evaluation_questions_dropped(tmp_path):
    evaluated = "Compose an engaging travel blog post about a recent trip to Hawaii, highlighting cultural experiences and must-see attractions."
    assert question_digest(evaluated) in eval_question_digests()  # MT-bench question 81
    records = [{"id": f"held-{i}", "conversation": [{"role": "user", "content": f"Question {i}?"}, {"role": "assistant", "content": "An answer."}]} for i in range(6)]
    records[2]["conversation"][0]["content"] = evaluated
    path = tmp_path / "heldout.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    args = argparse.Namespace(
        prompts="sharegpt", prompts_file=str(path), start=0, num_prompts=10, seed=0, eval_data_dir=None, sharegpt_file=None
    )
    conversations = cli.training_conversations(args)
    assert sorted(c.id for c in conversations) == ["held-0", "held-1", "held-3", "held-4", "held-5"]
    assert all(c.messages[0]["content"].startswith("Question") for c in conversations)
    later = cli.training_conversations(argparse.Namespace(**{**vars(args), "start": 1, "num_prompts": 2}))
    assert [c.id for c in later] == [c.id for c in conversations[1:3]]
