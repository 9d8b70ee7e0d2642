"""``hf-adaptive-spec record`` with tiny models: shards, resuming, profile, training prompts, benchmark questions."""

from __future__ import annotations

import argparse
import copy
import json
import re

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.bench.conversation import turn_prompt_ids
from hf_adaptive_spec.core.cost_curve import CostCurve, cpu_instruction_set
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.environments import (
    ReplayRecording,
    cli,
    load_recording,
    load_training_recording,
    record_prompts,
    record_replay,
)
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training.ltd import script as ltd_script
from hf_adaptive_spec.training.radar import script as radar_script
from hf_adaptive_spec.training.resps import script as resps_script
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
    monkeypatch.setattr(cli, "load_target", lambda name=None: (target, None))
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
    # the processor's instruction set, as `profile` writes it: a policy trained on it fits this processor only
    assert measured.cost_curve() == CostCurve("cpu", "float32", "eager", cpu_instruction_set())
    # no --eagle3-checkpoint: the shipped one
    assert measured.drafter == "hf_adaptive_spec:eagle3-smollm2-135m-instruct"

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
    for option in ("--sharegpt-file", "--eval-data-dir"):  # other prompts, or other prompts dropped
        assert cli.main(["--output", output, "--start", "1", "--num-prompts", "1", option, str(tmp_path), *TREE]) == 2
        assert f"{option[2:].replace('-', '_')} differ" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--max-new-tokens", "0"), ("--max-new-tokens", "-5"),
                                         ("--max-new-tokens", "1"), ("--total-tokens", "1")])
def test_a_recording_that_would_hold_nothing_to_replay_is_refused(tiny_cli, tmp_path, capsys, flag, value):
    """One new token records no cycle and a verification of one token the root alone: refused before anything is
    written (a recording of no positions ranked every tree at 0 tokens/s), here and in record_replay."""
    output = tmp_path / "rec"
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE, flag, value]) == 2
    assert f"{flag} must be at least 2, got {value}" in capsys.readouterr().err and not output.exists()
    drafter = _eagle3(tiny_cli)
    with pytest.raises(ValueError, match="must be at least 2|>= 2"):
        record_replay(tiny_cli, drafter, PROMPTS[:1], TreeConfig(3, 2, 5 if flag == "--max-new-tokens" else 1),
                      int(value) if flag == "--max-new-tokens" else 10)


def test_the_manifest_keeps_the_drafters_weights_and_refuses_shards_of_other_weights(tiny_cli, tmp_path, monkeypatch,
                                                                                      capsys):
    """A drafter retrained in its folder keeps its name: the manifest records its weights' digest, and shards drafted
    by other weights under that name are refused, not mixed into one recording. A folder recorded before the digest
    was kept resumes, and its manifest does not claim a digest for shards of unknown weights."""
    output = tmp_path / "rec"
    argv = ["--output", str(output), "--num-prompts", "1", *TREE]
    assert cli.main(argv) == 0
    manifest = json.loads((output / "record_args.json").read_text())
    assert manifest["drafter_weights"] == _eagle3(tiny_cli).weights_digest()

    def retrained(model, checkpoint):
        drafter = _eagle3(model)
        with torch.no_grad():
            next(drafter.model.parameters()).add_(0.5)
        return drafter

    monkeypatch.setattr(cli, "load_drafter", retrained)
    assert cli.main(["--output", str(output), "--start", "1", "--num-prompts", "1", *TREE]) == 2
    error = capsys.readouterr().err
    assert f"other drafter weights (digest {manifest['drafter_weights']}" in error and "another --output" in error
    assert len(load_recording(output).prompts) == 1

    del manifest["drafter_weights"]  # as written before digests were kept
    (output / "record_args.json").write_text(json.dumps(manifest))
    assert cli.main(["--output", str(output), "--start", "1", "--num-prompts", "1", *TREE]) == 0
    assert "drafter_weights" not in json.loads((output / "record_args.json").read_text())


def test_the_manifest_keeps_the_targets_weights_and_refuses_shards_of_another_target_under_its_name(
    tiny_cli, tmp_path, monkeypatch, capsys
):
    """A target retrained in its --model folder keeps its name: the manifest records its weights' digest and shards
    of other weights are refused; a folder recorded before the digest was kept resumes without claiming one."""
    from hf_adaptive_spec.core.drafter_identity import weights_digest

    drafter = _eagle3(tiny_cli)  # one drafter checkpoint throughout
    monkeypatch.setattr(cli, "load_drafter", lambda model, checkpoint: drafter)
    output = tmp_path / "rec"
    argv = ["--output", str(output), "--model", str(tmp_path), "--num-prompts", "1", *TREE]
    assert cli.main(argv) == 0
    manifest = json.loads((output / "record_args.json").read_text())
    assert manifest["target_weights"] == weights_digest(tiny_cli)
    retrained = tiny_model("llama", seed=1)
    monkeypatch.setattr(cli, "load_target", lambda name=None: (retrained, None))
    later = ["--output", str(output), "--model", str(tmp_path), "--start", "1", "--num-prompts", "1", *TREE]
    assert cli.main(later) == 2
    error = capsys.readouterr().err
    assert f"other target weights (digest {manifest['target_weights']}" in error and "another --output" in error
    assert len(load_recording(output).prompts) == 1
    del manifest["target_weights"]  # as written before digests were kept
    (output / "record_args.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(cli, "load_target", lambda name=None: (tiny_cli, None))
    assert cli.main(later) == 0
    assert "target_weights" not in json.loads((output / "record_args.json").read_text())


def test_a_run_that_records_no_shard_does_not_bind_the_folder(tiny_cli, tmp_path, monkeypatch, capsys):
    """A run that fails on its prompts writes no manifest, and a manifest beside no finished shard (a run stopped
    before its first) binds no later run: the corrected command records."""
    output = tmp_path / "rec"
    monkeypatch.setattr(cli, "load_prompts", lambda tokenizer, a: [])  # e.g. a --start past the set
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE]) == 2
    err = capsys.readouterr().err
    assert "No sharegpt prompts of at most --max-prompt-tokens 512 tokens from index 0" in err and not output.exists()
    assert "lower --start or raise --max-prompt-tokens" in err
    output.mkdir()
    (output / "record_args.json").write_text(json.dumps({"drafter": "eagle3", "seed": 7}))
    monkeypatch.setattr(cli, "load_prompts", lambda tokenizer, a: PROMPTS[a.start : a.start + a.num_prompts])
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE]) == 0
    assert json.loads((output / "record_args.json").read_text())["seed"] == 0 and load_recording(output).prompts


def test_the_manifest_names_the_prompts_recorded_and_accepts_its_earlier_form(tiny_cli, tmp_path):
    """With --prompts-file the manifest said "prompts": "sharegpt" (the unused default): it names only the file now,
    and a folder recorded with the earlier form is resumed, not refused."""
    output, prompts_file = tmp_path / "rec", str(tmp_path / "heldout.jsonl")
    argv = ["--output", str(output), "--prompts-file", prompts_file, "--num-prompts", "1", *TREE]
    assert cli.main(argv) == 0
    manifest = json.loads((output / "record_args.json").read_text())
    assert manifest["prompts_file"] == prompts_file and "prompts" not in manifest
    assert cli.main(["--output", str(tmp_path / "plain"), "--num-prompts", "1", *TREE]) == 0
    assert json.loads((tmp_path / "plain" / "record_args.json").read_text())["prompts"] == "sharegpt"  # the set used
    (output / "record_args.json").write_text(json.dumps({**manifest, "prompts": "sharegpt"}))  # as written before
    assert cli.main(["--output", str(output), "--prompts-file", prompts_file, "--start", "1", "--num-prompts", "1",
                     *TREE]) == 0
    assert len(load_recording(output).prompts) == 2


def test_the_manifest_names_a_local_target_by_its_absolute_path(tiny_cli, tmp_path, monkeypatch):
    """``--model my-model`` typed in one directory names the same folder from any other (the policy trainers compare it
    with a profile's target); a folder recorded with the path as typed, before, still resumes from where it was, and
    its manifest is rewritten with the absolute path (a trainer run from elsewhere resolved the typed one there)."""
    from hf_adaptive_spec.environments.provenance import recorded_pair

    (tmp_path / "my-model").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    output = tmp_path / "rec"
    assert cli.main(["--output", str(output), "--model", "my-model", "--num-prompts", "1", *TREE]) == 0
    manifest = json.loads((output / "record_args.json").read_text())
    assert manifest["model"] == str((tmp_path / "my-model").resolve())
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert recorded_pair(output)[0] == str((tmp_path / "my-model").resolve())

    monkeypatch.chdir(tmp_path)
    (output / "record_args.json").write_text(json.dumps({**manifest, "model": "my-model"}))  # as written before
    assert cli.main(["--output", str(output), "--model", "my-model", "--start", "1", "--num-prompts", "1", *TREE]) == 0
    assert len(load_recording(output).prompts) == 2
    assert json.loads((output / "record_args.json").read_text()) == manifest  # rewritten with the absolute path
    assert sorted(path.name for path in output.iterdir() if not path.name.startswith("shard-")) == ["record_args.json"]
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert recorded_pair(output)[0] == str((tmp_path / "my-model").resolve())


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
    conversations = record_prompts.training_conversations(args)
    assert len(conversations) == 164 - 80  # EAGLE's HumanEval evaluation set holds 80 of the 164
    questions = eval_question_digests()
    assert not any(question_digest(c.messages[0]["content"]) in questions for c in conversations)
    later = record_prompts.training_conversations(argparse.Namespace(**{**vars(args), "start": 10, "num_prompts": 5}))
    assert [c.id for c in later] == [c.id for c in conversations[10:15]]


def test_prompts_file_records_are_the_prompts_with_evaluation_questions_dropped(tmp_path):
    evaluated = (
        "Compose an engaging travel blog post about a recent trip to Hawaii, "
        "highlighting cultural experiences and must-see attractions."
    )
    assert question_digest(evaluated) in eval_question_digests()  # MT-bench question 81
    records = [
        {
            "id": f"held-{i}",
            "conversation": [
                {"role": "user", "content": f"Question {i}?"},
                {"role": "assistant", "content": "An answer."},
            ],
        }
        for i in range(6)
    ]
    records[2]["conversation"][0]["content"] = evaluated
    path = tmp_path / "heldout.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    args = argparse.Namespace(
        prompts="sharegpt", prompts_file=str(path), start=0, num_prompts=10, seed=0, eval_data_dir=None,
        sharegpt_file=None,
    )
    conversations = record_prompts.training_conversations(args)
    assert sorted(c.id for c in conversations) == ["held-0", "held-1", "held-3", "held-4", "held-5"]
    assert all(c.messages[0]["content"].startswith("Question") for c in conversations)
    later = record_prompts.training_conversations(argparse.Namespace(**{**vars(args), "start": 1, "num_prompts": 2}))
    assert [c.id for c in later] == [c.id for c in conversations[1:3]]


CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}. {% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def _question_file(tmp_path):
    rows = [
        {"question_id": i, "category": category, "turns": [f"{category} question {i}" + " more" * 30 * (i == 4), "x"]}
        for i, category in enumerate(["writing", "writing", "writing", "math", "math", "rag"], 1)
    ]
    path = tmp_path / "question.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def question_cli(monkeypatch, char_tokenizer):
    """The command with a tiny target and drafter and a character tokenizer with a chat template."""
    tokenizer = copy.deepcopy(char_tokenizer)
    tokenizer.chat_template = CHAT_TEMPLATE
    target = tiny_model("llama")
    monkeypatch.setattr(cli, "load_target", lambda name=None: (target, tokenizer))
    monkeypatch.setattr(cli, "load_drafter", lambda model, checkpoint: _eagle3(model))
    return target, tokenizer


def test_questions_are_recorded_as_the_bench_asks_them_and_trainers_refuse_them(question_cli, tmp_path, caplog):
    target, tokenizer = question_cli
    questions, output = _question_file(tmp_path), tmp_path / "rec"
    argv = ["--output", str(output), "--questions", str(questions), "--per-category", "2", "--max-prompt-tokens", "60"]
    with caplog.at_level("WARNING", logger=cli.logger.name):
        assert cli.main(argv + ["--num-prompts", "3", *TREE]) == 0
    assert "1 of the 5 questions are over --max-prompt-tokens 60 and left out (question ids [4])" in caplog.text

    # the first 2 per category, first turns only, the one over 60 tokens (question 4) left out, then 3 of them
    kept = [(1, "writing"), (2, "writing"), (5, "math")]
    expected = [turn_prompt_ids(tokenizer, [f"{category} question {i}"], []) for i, category in kept]
    recording = load_recording(output)
    assert [trees[0].context_length for trees in recording.prompts] == [p.shape[1] + 1 for p in expected]
    drafter = _eagle3(target)
    reference = record_replay(target, drafter, expected, TreeConfig(3, 2, 5), 10, drafter.feature_layers)
    assert [_rows(trees) for trees in recording.prompts] == [_rows(trees) for trees in reference.prompts]
    assert json.loads((output / "record_args.json").read_text())["questions"] == str(questions)

    for folder in (output, output / "shard-000000-000003"):
        with pytest.raises(ValueError, match="must not train on evaluation prompts"):
            load_training_recording(folder)
    profile = tmp_path / "profile.json"
    HardwareProfile(
        device="cpu", dtype="float32", num_threads=1, context_length=8, verify_tokens=[1, 8], verify_seconds=[1.0, 1.1],
        draft_step_seconds=0.1,
    ).save(profile)
    ltd_args = ltd_script.make_parser().parse_args_and_config(
        args=["--recording_dir", str(output), "--profile_path", str(profile), "--output_dir", str(tmp_path / "ltd")]
    )
    with pytest.raises(ValueError, match="must not train on evaluation prompts"):
        ltd_script.main(*ltd_args)
    with pytest.raises(ValueError, match="must not train on evaluation prompts"):
        resps_script.load_environment(
            resps_script.ReSpSScriptArguments(recordings=[str(output)], hardware_profile=str(profile))
        )
    with pytest.raises(ValueError, match="must not train on evaluation prompts"):
        radar_script.load_or_build_dataset(radar_script.RadarScriptArguments(
            profile_path=str(profile), dataset_path=str(tmp_path / "radar"), recording_path=str(output)
        ))


def test_questions_options_are_checked(question_cli, tmp_path, capsys):
    output = str(tmp_path / "rec")
    assert cli.main(["--output", output, "--per-category", "2", *TREE]) == 2
    assert "pass it with --questions" in capsys.readouterr().err
    questions = str(_question_file(tmp_path))
    assert cli.main(["--output", output, "--questions", questions, "--prompts-file", questions, *TREE]) == 2
    assert "pass one of them" in capsys.readouterr().err
    assert cli.main(["--output", output, "--questions", str(tmp_path / "missing.jsonl"), *TREE]) == 2
    assert "question file not found" in capsys.readouterr().err


def test_turns_records_each_later_turn_after_the_targets_own_answer(question_cli, tmp_path):
    """``--turns 2`` asks a question's second turn after the target's recorded greedy answer to its first, as the bench
    asks it; the manifest names the turns."""
    target, tokenizer = question_cli
    questions, output = _question_file(tmp_path), tmp_path / "rec"
    argv = ["--output", str(output), "--questions", str(questions), "--max-prompt-tokens", "120", "--turns", "2"]
    assert cli.main(argv + ["--num-prompts", "2", "--shard-size", "1", *TREE]) == 0

    recording, drafter = load_recording(output), _eagle3(target)
    prompts = []
    for i in (1, 2):
        first = turn_prompt_ids(tokenizer, [f"writing question {i}", "x"], [])
        answer = record_replay(target, drafter, [first], TreeConfig(3, 2, 5), 10, drafter.feature_layers).sequence(0)
        second = turn_prompt_ids(tokenizer, [f"writing question {i}", "x"], [answer[first.shape[1] :]])
        assert answer[first.shape[1] :] and tokenizer.decode(answer[first.shape[1] :], skip_special_tokens=True).strip()
        prompts += [first, second]
    reference = record_replay(target, drafter, prompts, TreeConfig(3, 2, 5), 10, drafter.feature_layers)
    assert recording.prompt_ids == reference.prompt_ids
    assert [_rows(trees) for trees in recording.prompts] == [_rows(trees) for trees in reference.prompts]
    assert json.loads((output / "record_args.json").read_text())["turns"] == 2
    assert cli.main(argv + ["--num-prompts", "2", "--turns", "1", *TREE]) == 2  # not the recording's turns


def test_a_dialogue_ends_at_a_turn_over_the_prompt_limit(char_tokenizer):
    tokenizer = copy.deepcopy(char_tokenizer)
    tokenizer.chat_template = CHAT_TEMPLATE
    asked = []

    def record_prompt(ids):
        asked.append(ids.shape[1])
        return ReplayRecording(TreeConfig(1, 1, 2), 10, 4, [[]], prompt_ids=[ids[0].tolist()])

    recording = cli.Dialogue(["short", "long " * 20, "short"], tokenizer, 60).record(record_prompt)
    assert len(recording.prompts) == 1 and asked == [len("user: short. assistant: ")]
    with pytest.raises(ValueError, match="over --max-prompt-tokens 60.*raise --max-prompt-tokens"):
        cli.Dialogue(["long " * 20], tokenizer, 60).record(record_prompt)


def test_prompts_file_records_take_their_later_turns_from_the_sharegpt_conversation_they_begin(
    tmp_path, char_tokenizer
):
    """A regenerated first exchange continues with ShareGPT's later user turns of the same id and first turn; another
    first turn, a conversation without more turns, or an evaluation question in a later turn gives none."""
    evaluated = ("Compose an engaging travel blog post about a recent trip to Hawaii, highlighting cultural "
                 "experiences and must-see attractions.")  # MT-bench question 81
    records = [{"id": f"c{i}", "conversation": [{"role": "user", "content": f"Question {i}?"},
                                                {"role": "assistant", "content": "Mine."}]} for i in range(5)]
    sharegpt = [
        {"id": "c0", "conversations": [{"from": "human", "value": "Question 0?"}, {"from": "gpt", "value": "Theirs."},
                                       {"from": "human", "value": "And then?"}, {"from": "gpt", "value": "Then."},
                                       {"from": "human", "value": "Third?"}]},
        {"id": "c1", "conversations": [{"from": "human", "value": "Another question?"}, {"from": "gpt", "value": "A."},
                                       {"from": "human", "value": "More?"}]},
        {"id": "c2", "conversations": [{"from": "human", "value": "Question 2?"}, {"from": "gpt", "value": "A."}]},
        {"id": "c3", "conversations": [{"from": "human", "value": "Question 3?"}, {"from": "gpt", "value": "A."},
                                       {"from": "human", "value": evaluated}]},
    ]
    path, sharegpt_file = tmp_path / "heldout.jsonl", tmp_path / "sharegpt.json"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    sharegpt_file.write_text(json.dumps(sharegpt), encoding="utf-8")
    args = argparse.Namespace(prompts="sharegpt", prompts_file=str(path), start=0, num_prompts=10, seed=0,
                              eval_data_dir=None, sharegpt_file=str(sharegpt_file), turns=2)
    conversations = record_prompts.training_conversations(args)
    assert record_prompts.sharegpt_user_turns(conversations, args) == {"c0": ["Question 0?", "And then?", "Third?"]}
    assert record_prompts.sharegpt_user_turns(conversations, argparse.Namespace(**{**vars(args), "turns": 1})) == {}

    tokenizer = copy.deepcopy(char_tokenizer)
    tokenizer.chat_template = CHAT_TEMPLATE
    dialogues = cli.load_prompts(tokenizer, argparse.Namespace(**vars(args), questions=None, max_prompt_tokens=200))
    expected = [["Question 0?", "And then?"]] + [[f"Question {i}?"] for i in range(1, 5)]
    assert sorted(d.user_turns for d in dialogues) == expected


@pytest.mark.parametrize("flag", ["--max-prompt-tokens", "--top-k", "--profile-repeats", "--profile-context-length",
                                  "--per-category"])
def test_counts_below_one_are_refused_naming_the_flag(tiny_cli, tmp_path, capsys, flag):
    """--max-prompt-tokens 0 skipped every prompt and told to lower --start; --profile-repeats 0 timed 3 rounds;
    --per-category 0 (or -2) said only that the question file had no questions to run."""
    output = tmp_path / "rec"
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE, flag, "0"]) == 2
    assert f"{flag} must be at least 1, got 0" in capsys.readouterr().err and not output.exists()


@pytest.mark.parametrize("value, message", [("abc", "comma-separated hidden-state indices"),
                                            ("1,5", r"\[5\] are outside the target's hidden states 0"),
                                            ("-1", r"\[-1\] are outside"),
                                            ("2,3,2", r"names \[2\] more than once")])
def test_feature_layers_are_checked_naming_the_flag(tiny_cli, tmp_path, capsys, value, message):
    output = tmp_path / "rec"
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE, "--feature-layers", value]) == 2
    err = capsys.readouterr().err
    assert "--feature-layers" in err and re.search(message, err) and not output.exists()
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE, "--feature-layers", "0,4"]) == 0  # 4 layers


@pytest.mark.parametrize("argv, named", [
    (["--questions", "q.jsonl", "--prompts", "humaneval"], "--prompts"),
    (["--questions", "q.jsonl", "--seed", "3"], "--seed"),
    (["--questions", "q.jsonl", "--sharegpt-file", "s.json"], "--sharegpt-file"),
    (["--prompts-file", "p.jsonl", "--prompts", "sharegpt"], "--prompts"),
    (["--prompts-file", "p.jsonl", "--sharegpt-file", "s.json"], "--sharegpt-file"),
    (["--prompts", "humaneval", "--sharegpt-file", "s.json"], "--sharegpt-file"),  # the card named ShareGPT
    (["--prompts", "humaneval", "--turns", "2"], "--turns 2"),  # HumanEval's problems are one turn each
])
def test_options_the_chosen_prompts_ignore_are_refused(tiny_cli, tmp_path, capsys, argv, named):
    output = tmp_path / "rec"
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE, *argv]) == 2
    err = capsys.readouterr().err
    assert f"{named} would be ignored" in err and f"drop {named}" in err and not output.exists()


def test_the_defaults_of_the_prompt_options_are_filled_in_after_the_check():
    args = cli.make_parser().parse_args(["--output", "o"])
    cli.resolve_prompt_options(args)
    assert (args.prompts, args.seed) == ("sharegpt", 0)
    args = cli.make_parser().parse_args(["--output", "o", "--prompts-file", "p", "--turns", "2", "--sharegpt-file", "s",
                                         "--seed", "4"])
    cli.resolve_prompt_options(args)  # later turns come from the ShareGPT file; the seed orders the file's records
    assert (args.seed, args.sharegpt_file) == (4, "s")


def test_an_output_that_is_a_file_or_a_recording_of_its_own_is_refused(tiny_cli, tmp_path, capsys):
    """A file raised a bare FileExistsError; shards recorded beside a recording.json were never loaded (load_recording
    read that recording alone)."""
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    assert cli.main(["--output", str(afile), "--num-prompts", "1", *TREE]) == 2
    assert f"--output {afile} is a file" in capsys.readouterr().err
    assert cli.main(["--output", str(tmp_path / "rec"), "--num-prompts", "2", "--shard-size", "1", *TREE]) == 0
    shard = tmp_path / "rec" / "shard-000000-000001"
    ReplayRecording.load(shard).save(tmp_path / "saved")
    for folder in (shard, tmp_path / "saved"):
        before = sorted(path.name for path in folder.iterdir())
        assert cli.main(["--output", str(folder), "--num-prompts", "2", "--shard-size", "1", *TREE]) == 2
        assert "holds a recording of its own (recording.json)" in capsys.readouterr().err
        assert sorted(path.name for path in folder.iterdir()) == before


@pytest.mark.parametrize("text, what", [('{"model": ', "Expecting value"), ("[1, 2]", "a JSON list, not an object")])
def test_a_damaged_manifest_is_refused_naming_the_file(tiny_cli, tmp_path, capsys, text, what):
    """It said only 'Expecting value: line 1 column 11' on the command line, and load_training_recording raised a bare
    JSONDecodeError."""
    output = tmp_path / "rec"
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE]) == 0
    (output / "record_args.json").write_text(text)
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE]) == 2
    err = capsys.readouterr().err
    assert f"{output / 'record_args.json'} is damaged ({what}" in err and "new --output" in err
    with pytest.raises(ValueError, match=re.escape(f"{output / 'record_args.json'} is damaged")):
        load_training_recording(output)


def test_prompts_no_shard_holds_between_two_are_warned_of(tiny_cli, tmp_path, caplog):
    """Shards 0-1 and 3-4 loaded as a recording of 2 prompts without a word: its prompt 1 is the record order's 3."""
    output = tmp_path / "rec"
    assert cli.main(["--output", str(output), "--num-prompts", "1", *TREE]) == 0
    assert cli.main(["--output", str(output), "--start", "3", "--num-prompts", "1", *TREE]) == 0
    with caplog.at_level("WARNING", logger="hf_adaptive_spec.environments.storage"):
        assert len(load_recording(output).prompts) == 2
    assert "holds no shard for prompts 1 to 2 (between shard-000000-000001 and shard-000003-000004)" in caplog.text
    assert f"--output {output} --start 1 --num-prompts 2" in caplog.text
    caplog.clear()
    assert cli.main(["--output", str(output), "--start", "1", "--num-prompts", "2", *TREE]) == 0
    with caplog.at_level("WARNING", logger="hf_adaptive_spec.environments.storage"):
        assert len(load_recording(output).prompts) == 4
    assert "holds no shard" not in caplog.text


def test_a_shard_that_lost_its_recording_json_is_refused_naming_it(tiny_cli, tmp_path, capsys):
    """load_recording left its prompts out without a word, and a rerun recorded them, then failed to rename the new
    shard over the old folder with a bare OSError (Directory not empty)."""
    output = tmp_path / "rec"
    argv = ["--output", str(output), "--num-prompts", "2", "--shard-size", "1", *TREE]
    assert cli.main(argv) == 0
    shard = output / "shard-000001-000002"
    (shard / "recording.json").unlink()
    message = f"The recording in {shard} is damaged or was saved in part (recording.json is missing): delete that"
    with pytest.raises(ValueError, match=re.escape(message)):
        load_recording(output)
    assert cli.main(argv) == 2 and message in capsys.readouterr().err
    assert not (output / "shard-000001-000002.partial").exists()


@pytest.mark.parametrize("config, message", [("{", "config.json' is not valid JSON"),
                                             ('{"artifact_type": "dvi_drafter"}', "holds a 'dvi_drafter' artifact")])
def test_an_eagle3_checkpoint_that_does_not_load_is_one_line_on_stderr(monkeypatch, tmp_path, capsys, config, message):
    """A damaged config.json or another artifact's folder raised a traceback (ArtifactError) instead of the command's
    one-line error."""
    target = tiny_model("llama")
    monkeypatch.setattr(cli, "load_target", lambda name=None: (target, None))
    monkeypatch.setattr(cli, "load_prompts", lambda tokenizer, a: PROMPTS[a.start : a.start + a.num_prompts])
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(config)
    argv = ["--output", str(tmp_path / "rec"), "--num-prompts", "1", "--eagle3-checkpoint", str(checkpoint), *TREE]
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "rec").exists()


def test_the_sharegpt_file_that_continues_a_prompts_files_later_turns_binds_the_folder(tiny_cli, tmp_path, capsys):
    """With --prompts-file and --turns 2 the ShareGPT file gives the later turns, but the manifest left it out: a
    rerun with another file (or the wheel's) added shards of other later turns without a word."""
    output = tmp_path / "rec"
    argv = ["--output", str(output), "--prompts-file", "p.jsonl", "--turns", "2", *TREE]
    assert cli.main([*argv, "--sharegpt-file", "a.json", "--num-prompts", "1"]) == 0
    assert json.loads((output / "record_args.json").read_text())["sharegpt_file"] == "a.json"
    for other in (["--sharegpt-file", "b.json"], []):
        assert cli.main([*argv, *other, "--start", "1", "--num-prompts", "1"]) == 2
        assert "other settings (sharegpt_file differ" in capsys.readouterr().err
    assert cli.main([*argv, "--sharegpt-file", "a.json", "--start", "1", "--num-prompts", "1"]) == 0
    assert len(load_recording(output).prompts) == 2
    # a folder recorded before the file was kept resumes with the command that made it (its file is unknown)
    manifest = json.loads((output / "record_args.json").read_text())
    del manifest["sharegpt_file"]
    (output / "record_args.json").write_text(json.dumps(manifest))
    assert cli.main([*argv, "--sharegpt-file", "a.json", "--start", "2", "--num-prompts", "1"]) == 0
