"""A recording keeps digests of the target and drafter it was made with, and recordings of other models are refused
where they are pooled (concatenated shards, a multi-top_k environment, a ranking over recordings): pooled, a policy
or a ranking learned silently from two drafters' acceptance or two targets' generations."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.drafter_identity import weights_digest
from hf_adaptive_spec.environments import MultiReplayEnvironment, ReplayRecording, record_replay
from hf_adaptive_spec.environments.static_grid import rank_over_recordings
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile

torch.set_num_threads(1)

RECORDED = TreeConfig(depth=2, top_k=2, total_tokens=4)
MAX_NEW = 8
PROMPTS = [prompt(7, seed=21)]
PROFILE = HardwareProfile(
    device="cpu", dtype="float32", num_threads=1, context_length=64,
    verify_tokens=[1, 2, 4], verify_seconds=[1.0, 1.2, 1.5], draft_step_seconds=0.1,
)


def _record(target, drafter_layers: int) -> ReplayRecording:
    drafter = hfas.CausalLMDrafter.from_target_layers(target, drafter_layers)
    return record_replay(target, drafter, PROMPTS, RECORDED, MAX_NEW)


@pytest.fixture(scope="module")
def recording(target):
    return _record(target, 2)


def test_a_recording_keeps_its_target_and_drafter_digests_through_save_and_load(target, recording, tmp_path):
    assert recording.target_weights == weights_digest(target)
    assert recording.drafter_weights == hfas.CausalLMDrafter.from_target_layers(target, 2).weights_digest()
    recording.save(tmp_path / "r")
    assert ReplayRecording.load(tmp_path / "r").model_digests() == recording.model_digests()


def test_a_recording_saved_before_the_digests_were_kept_loads_and_pools_with_a_known_one(recording, tmp_path):
    recording.save(tmp_path / "old")
    path = tmp_path / "old" / "recording.json"
    meta = json.loads(path.read_text())
    del meta["target_weights"], meta["drafter_weights"]
    path.write_text(json.dumps(meta))
    old = ReplayRecording.load(tmp_path / "old")
    assert old.model_digests() == {"target_weights": None, "drafter_weights": None}
    joined = ReplayRecording.concatenate([old, recording])
    assert joined.model_digests() == recording.model_digests()
    assert len(joined.prompts) == 2


POOLS = {
    "concatenated": ReplayRecording.concatenate,
    "replayed as one environment": lambda recordings: MultiReplayEnvironment(recordings, PROFILE),
    "ranked together": lambda recordings: rank_over_recordings(recordings, PROFILE),
}


@pytest.mark.parametrize("pooled", list(POOLS))
def test_recordings_of_another_drafter_are_refused_where_pooled(target, recording, pooled):
    """Recorded with a drafter of one layer and one of two: the generations are the target's either way, and only
    the digests tell the acceptance apart."""
    other = _record(target, 1)
    assert other.drafter_weights != recording.drafter_weights
    assert other.sequence(0) == recording.sequence(0)  # the same greedy generation
    with pytest.raises(ValueError, match=f"other drafter weights cannot be {pooled}: their drafters' digests"):
        POOLS[pooled]([recording, other])


@pytest.mark.parametrize("pooled", list(POOLS))
def test_recordings_of_another_target_are_refused_where_pooled(recording, pooled):
    other = replace(recording, target_weights="0" * 32)
    with pytest.raises(ValueError, match=f"other target weights cannot be {pooled}: their targets' digests"):
        POOLS[pooled]([recording, other])


def test_profile_refuses_recordings_of_two_drafters_before_any_timing(target, recording, tmp_path, capsys,
                                                                       monkeypatch):
    """It ranked them only after minutes of timing, and failed there with a traceback; nothing was saved."""
    from hf_adaptive_spec.profiling import cli

    recording.save(tmp_path / "a")
    _record(target, 1).save(tmp_path / "b")
    monkeypatch.setattr(cli, "measure_profile", lambda args: pytest.fail("timed before the recordings were checked"))
    out = tmp_path / "profile.json"
    for extra in ([], ["--rerank"]):
        with pytest.raises(SystemExit):
            cli.main(["--recording", str(tmp_path / "a"), "--recording", str(tmp_path / "b"), "--json", str(out),
                      *extra])
        assert "--recording: Recordings made with other drafter weights cannot be ranked together" in (
            capsys.readouterr().err)
        assert not out.exists()


def test_a_target_built_under_inference_mode_is_recorded():
    """Its tensors keep no version counter: digesting them for the recording raised 'Inference tensors do not track
    version counter', where recording itself works."""
    with torch.inference_mode():
        target = tiny_model("llama")
    recorded = _record(target, 2)
    assert recorded.target_weights == weights_digest(target) and recorded.num_positions > 0


def test_a_profile_that_timed_another_drafter_is_refused_where_a_saved_recording_is_replayed(target, recording,
                                                                                              tmp_path):
    """A recording saved by ``ReplayRecording.save`` has no ``record_args.json``, so only its own digest tells its
    drafter: replayed on a profile that timed another drafter, every cycle was priced with that drafter's step costs
    and ranked on them, without a word."""
    from hf_adaptive_spec.environments import ReplayEnvironment
    from hf_adaptive_spec.environments.static_grid import rank_static_trees

    recording.save(tmp_path / "r")
    saved = ReplayRecording.load(tmp_path / "r")
    other = hfas.CausalLMDrafter.from_target_layers(target, 1).weights_digest()
    timed = replace(PROFILE, drafter="org/other", drafter_weights=other)
    message = (f"timed drafter weights with digest {other}, and the recording was drafted by weights with digest "
               f"{saved.drafter_weights}")
    for replay in (ReplayEnvironment, lambda r, p: MultiReplayEnvironment([r], p), rank_static_trees):
        with pytest.raises(ValueError, match=message) as refused:
            replay(saved, timed)
        assert "Record again with this drafter" in str(refused.value)
    ReplayEnvironment(saved, replace(timed, drafter_weights=saved.drafter_weights))  # its own drafter's costs
    ReplayEnvironment(replace(saved, drafter_weights=None), timed)  # a digest unknown is not compared


@pytest.mark.parametrize("layers, message", [((2, 2), r"feature_layers names \[2\] more than once"),
                                             ((1, 5), r"feature_layers \[5\] are outside the target's hidden states 0"),
                                             ((-1,), r"feature_layers \[-1\] are outside"),
                                             ((True,), r"feature_layers takes hidden-state indices \(ints\)"),
                                             (("2",), r"feature_layers takes hidden-state indices \(ints\)")])
def test_record_replay_refuses_feature_layers_the_command_line_refuses(target, layers, message):
    """``record --feature-layers 2,2`` was refused, ``record_replay(..., feature_layers=(2, 2))`` recorded a recording
    claiming layer 2 twice (refused where pooled with one keeping it once); a layer past the target's failed inside
    the hidden-state capture without the fix, a string with a TypeError, and True was kept as layer 1."""
    drafter = hfas.CausalLMDrafter.from_target_layers(target, 2)
    with pytest.raises(ValueError, match=message):
        record_replay(target, drafter, PROMPTS, RECORDED, MAX_NEW, feature_layers=layers)
    assert record_replay(target, drafter, PROMPTS, RECORDED, MAX_NEW, feature_layers=(0, 4)).feature_layers == (0, 4)


def test_a_trainers_profile_of_another_drafter_is_refused_for_a_recording_saved_without_a_manifest(target, recording,
                                                                                                   tmp_path):
    """The policy trainers check the profile against the recording's ``record_args.json`` only: a recording saved by
    ``ReplayRecording.save`` passed with any drafter's profile, and RADAR (whose replay runs on untimed placeholder
    costs) trained on it, marking the policy as trained for the profile's drafter."""
    from hf_adaptive_spec.environments.provenance import load_profile_for_recordings

    recording.save(tmp_path / "bare")
    other = hfas.CausalLMDrafter.from_target_layers(target, 1).weights_digest()
    replace(PROFILE, drafter="org/other", drafter_weights=other).save(tmp_path / "other.json")
    with pytest.raises(ValueError, match=f"other.json timed drafter weights with digest {other}, and the recording "
                       f".*bare was drafted by weights with digest {recording.drafter_weights}"):
        load_profile_for_recordings(tmp_path / "other.json", [tmp_path / "bare"])
    replace(PROFILE, drafter_weights=recording.drafter_weights).save(tmp_path / "own.json")
    assert load_profile_for_recordings(tmp_path / "own.json", [tmp_path / "bare"]).drafter_weights is not None
