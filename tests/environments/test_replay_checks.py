"""Replay shows a policy what live ``generate`` shows it, and refuses what it cannot replay by name: the hidden states a
policy reads, the verification sizes a profile timed, a damaged recording, the fit reports of the online environment,
refusals that name their real cause, and the gymnasium environments' integer settings."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from replay_helpers import UNIT_PROFILE, two_layer_drafter
from tiny_models import prompt

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.cost_curve import CostCurve
from hf_adaptive_spec.environments import (
    ExtrapolatedCostWarning,
    MultiReplayEnvironment,
    OnlineEnvironment,
    ReplayEnvironment,
    ReplayRecording,
    load_recording,
    record_replay,
)
from hf_adaptive_spec.environments.gym import DraftStepEnv, TreeConfigEnv
from hf_adaptive_spec.environments.static_grid import rank_over_recordings, rank_static_trees
from hf_adaptive_spec.policies.base import DraftPolicy, TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile

torch.set_num_threads(1)

RECORDED = TreeConfig(depth=4, top_k=3, total_tokens=9)
MAX_NEW = 16
PROMPTS = [prompt(7, seed=11), prompt(12, seed=12)]
PROFILE = UNIT_PROFILE
_drafter = two_layer_drafter


@pytest.fixture(scope="module")
def recording(target):
    return record_replay(target, _drafter(target), PROMPTS, RECORDED, MAX_NEW, feature_layers=(1, 4))


class LayerPolicy(DraftPolicy):
    """Reads the hidden states ``layers`` and notes the ones each state holds and when its generations begin."""

    def __init__(self, layers: tuple[int, ...]):
        self.feature_layers = layers
        self.seen: list[list[int]] = []
        self.generations = 0

    def begin_generation(self):
        self.generations += 1

    def tree_config(self, state):
        self.seen.append(sorted(state.features))
        return RECORDED


def test_a_replayed_policy_sees_the_hidden_states_it_reads_and_no_other_as_live(target, recording):
    """The recording keeps layers 1 and 4; a policy reading 4 saw both in replay, and 4 alone live."""
    live = LayerPolicy((4,))
    target.generate(PROMPTS[0], max_new_tokens=MAX_NEW, do_sample=False, assistant_model=_drafter(target),
                    assistant_policy=live)
    for environment in (ReplayEnvironment(recording, PROFILE), MultiReplayEnvironment([recording], PROFILE)):
        replayed = LayerPolicy((4,))
        environment.replay_prompt(0, replayed)
        assert replayed.seen == live.seen == [[4]] * len(live.seen)
    assert sorted(MultiReplayEnvironment([recording], PROFILE).state(0, 0).features) == [1, 4]  # no policy: all


def test_a_policy_reading_hidden_states_the_recording_lacks_is_refused_before_its_replay_begins(recording):
    """It failed with a bare KeyError inside its own code, at its first cycle."""
    refusal = (r"reads the target's hidden states \[2\] \(its feature_layers \[2, 4\]\), but the recording keeps "
               r"\[1, 4\]: record it again keeping them \(`hf-adaptive-spec record --feature-layers 1,2,4`\)")
    for environment in (ReplayEnvironment(recording, PROFILE), MultiReplayEnvironment([recording], PROFILE)):
        policy = LayerPolicy((2, 4))
        with pytest.raises(ValueError, match=refusal):
            environment.replay(policy)
        assert (policy.generations, policy.seen) == (0, [])  # refused at the start: nothing of the policy ran
        with pytest.raises(ValueError, match=refusal):  # one cycle alone: the same refusal
            environment.replay_cycle(0, 3, policy)


def _profile(**fields) -> HardwareProfile:
    return replace(PROFILE, **fields)


@pytest.mark.parametrize("rank", [rank_static_trees, lambda recording, profile: rank_over_recordings([recording],
                                                                                                      profile)])
def test_ranking_refuses_a_profile_that_did_not_time_the_sizes_it_prices(recording, rank):
    """Timed at 8 tokens only, the plain step and the 9-token tree were ranked at the 8-token time."""
    with pytest.raises(ValueError, match=r"timed verifications of \[8\] tokens, and replaying .* needs \[1, 9\] too"):
        rank(recording, _profile(verify_tokens=[8], verify_seconds=[1.0]))


def test_a_replay_environment_refuses_a_profile_that_did_not_time_its_trees(recording):
    """A policy's training replays without ranking first: timed at 8 tokens only, its plain steps and 9-token trees
    were priced at the 8-token time, silently."""
    narrow = _profile(verify_tokens=[8], verify_seconds=[1.0])
    tree = recording.tree_config
    named = rf"the recording of depth {tree.depth}, top_k {tree.top_k}, total_tokens {tree.total_tokens}"
    for make in (ReplayEnvironment, lambda recording, profile: MultiReplayEnvironment([recording], profile)):
        # each recording was named 'recording 0': a MultiReplayEnvironment's are told apart by their trees
        with pytest.raises(ValueError, match=rf"timed verifications of \[8\] tokens, and replaying \['{named}'\] "
                           r"needs \[1, 9\]"):
            make(recording, narrow)


def test_a_lookup_branch_past_the_largest_timed_size_is_warned_of_as_an_estimate(recording, recwarn):
    """The profile timed up to 16 tokens: the 9-token trees with an 8-token branch verify up to 17, priced by
    extending the last measured segment. That was silent; it is warned of, naming the fix, and a branch inside the
    timed sizes is not."""
    with pytest.warns(ExtrapolatedCostWarning, match=r"timed verifications up to 16 tokens, and a recorded tree of 9 "
                                                     r"with the prompt-lookup branch of 8 verifies up to 17: .*"
                                                     r"\[4, 16\] tokens\), an estimate. Time them: `hf-adaptive-spec "
                                                     r"profile --recording DIR --lookup-tokens 8`"):
        ReplayEnvironment(recording, PROFILE, lookup_tokens=8)
    ReplayEnvironment(recording, PROFILE, lookup_tokens=7)
    bucketed = _profile(verify_tokens=[1, 4, 6, 32], verify_seconds=[0.1, 0.15, 0.2, 0.3], path="compiled",
                        buckets=[32])
    ReplayEnvironment(recording, bucketed, lookup_tokens=8)  # every tree is priced at its timed bucket
    assert not [w for w in recwarn if w.category is ExtrapolatedCostWarning]


def test_draft_step_env_refuses_verify_sizes_past_the_profiles_largest_bucket(recording):
    """Buckets [4, 6]: the agent's 8 candidates were verified as 5, silently."""
    bucketed = _profile(verify_tokens=[1, 4, 6], verify_seconds=[0.1, 0.15, 0.2], path="compiled", buckets=[4, 6])
    with pytest.raises(ValueError, match=r"verify_sizes \[2, 8\] verify up to 9 tokens with the root, but the "
                                         r"profile's static-cache path verifies at most 6 \(its largest bucket of "
                                         r"\[4, 6\]\).* Pass sizes <= 5"):
        DraftStepEnv(recording, bucketed, verify_sizes=[2, 8])
    DraftStepEnv(recording, bucketed, verify_sizes=[2, 5]).close()


def _cut_in_half(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit_meta(edit):
    def damage(folder):
        meta = json.loads((folder / "recording.json").read_text())
        edit(meta)
        (folder / "recording.json").write_text(json.dumps(meta))
    return damage


DAMAGES = {
    "no feature file": lambda folder: (folder / "features.safetensors").unlink(),
    "recording.json cut short": lambda folder: _cut_in_half(folder / "recording.json"),
    "feature file cut short": lambda folder: _cut_in_half(folder / "features.safetensors"),
    "a row without target_next": _edit_meta(lambda meta: meta["prompts"][0].__setitem__(0, meta["prompts"][0][0][:5])),
    "a short target_next": _edit_meta(lambda meta: meta["prompts"][0][5].__setitem__(5, meta["prompts"][0][5][5][:3])),
    "no tree_config": _edit_meta(lambda meta: meta.pop("tree_config")),
}


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_a_damaged_shard_is_refused_naming_it_and_the_fix(recording, tmp_path, damage):
    """Raw KeyError, JSONDecodeError, SafetensorError or TypeError named neither the shard nor the fix; a short
    target_next loaded and replayed silently."""
    for start, trees, ids in ((0, recording.prompts[:1], recording.prompt_ids[:1]),
                              (1, recording.prompts[1:], recording.prompt_ids[1:])):
        replace(recording, prompts=trees, prompt_ids=ids).save(tmp_path / f"shard-{start}-{start + 1}")
    damage(tmp_path / "shard-1-2")
    with pytest.raises(ValueError, match=r"The recording in .*shard-1-2 is damaged or was saved in part \(.+\): "
                                         r"delete that folder and record it again \(`hf-adaptive-spec record`"):
        load_recording(tmp_path)


def test_the_online_environment_reports_a_policy_trained_for_another_curve_or_branch_as_generate_does(target):
    """Through the environment's feedback recorder both reports were None."""
    policy = hfas.StaticTreePolicy(4, 3, 9)
    policy.mark_trained_on(CostCurve("cuda", "bfloat16", "compiled"))
    policy.trained_with_lookup_tokens = 4
    OnlineEnvironment(target, _drafter(target), PROMPTS[:1], 8).run(policy)
    stats = target.last_speculation
    assert stats.policy_cost_curve_mismatch.startswith("StaticTreePolicy was chosen for the cuda/bfloat16/compiled")
    assert stats.policy_lookup_mismatch.startswith("StaticTreePolicy was chosen with the 4-token prompt-lookup")
    assert "rank the trees again for this call's branch" in stats.policy_lookup_mismatch


def test_a_recording_of_no_prompts_is_refused_as_such_and_concatenates_keeping_the_others_prompt_ids(recording,
                                                                                                       tmp_path):
    """It was refused as generations that 'ended at their first token', and concatenated it dropped every prompt's
    ids, so a lookup replay was refused as 'recorded before they were kept'."""
    empty = replace(recording, prompts=[], prompt_ids=[])
    empty.save(tmp_path / "empty")
    assert load_recording(tmp_path / "empty").prompts == []
    for refused in (lambda: ReplayEnvironment(empty, PROFILE).replay(hfas.StaticTreePolicy(4, 3, 9)).tokens_per_second,
                    lambda: rank_static_trees(empty, PROFILE)):
        with pytest.raises(ValueError, match=r"No prompt was replayed: the recording holds none"):
            refused()
    joined = ReplayRecording.concatenate([empty, recording])
    assert joined.prompt_ids == recording.prompt_ids
    ReplayEnvironment(joined, PROFILE, lookup_tokens=2).replay(hfas.StaticTreePolicy(4, 3, 9))


def test_draft_step_env_refuses_a_config_that_drafts_nothing_as_such(recording):
    """Its reset said 'the recording's generations are too short'."""
    with pytest.raises(ValueError, match=r"drafts nothing \(depth 0: a plain step\).*depth >= 1"):
        DraftStepEnv(recording, PROFILE, config=TreeConfig(0, 3, 1), verify_sizes=[0, 0])


@pytest.mark.parametrize("make, named", [
    (lambda recording: TreeConfigEnv(recording, PROFILE, [TreeConfig(2, 3, 4)], cycles_per_action=2.5),
     r"TreeConfigEnv: cycles_per_action must be an int >= 1 .*got 2.5"),
    (lambda recording: TreeConfigEnv(recording, PROFILE, [TreeConfig(2, 3, 4)]).reset(options={"prompt": 1.9}),
     r"TreeConfigEnv.reset: options\['prompt'\] must be an int, got 1.9"),
    (lambda recording: DraftStepEnv(recording, PROFILE).reset(options={"prompt": 1.9}),
     r"DraftStepEnv.reset: options\['prompt'\] must be an int, got 1.9"),
    (lambda recording: DraftStepEnv(recording, PROFILE).reset(options={"prompt": 0, "position": 2.5}),
     r"DraftStepEnv.reset: options\['position'\] must be an int, got 2.5"),
    (lambda recording: DraftStepEnv(recording, PROFILE, verify_sizes=[2.5, 4]),
     r"DraftStepEnv: verify_sizes\[0\] must be an int \(a count of candidates"),
], ids=["cycles_per_action", "tree_config_env_prompt", "draft_step_env_prompt", "position", "verify_sizes"])
def test_the_gym_environments_refuse_a_count_that_is_no_int_by_name(recording, make, named):
    """2.5 cycles per action ran 3, prompt 1.9 replayed prompt 1, verify size 2.5 was accepted."""
    with pytest.raises(ValueError, match=named):
        make(recording)
