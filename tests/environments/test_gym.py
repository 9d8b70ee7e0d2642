"""The gymnasium environments pass check_env and replay exactly what ReplayEnvironment replays."""

from __future__ import annotations

import gc
import threading
import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import ReplayEnvironment, record_replay
from hf_adaptive_spec.environments.gym import DraftStepEnv, ScoreObservation, TreeConfigEnv, tokens_per_second
from hf_adaptive_spec.policies.base import DraftPolicy, TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile

torch.set_num_threads(1)

RECORDED = TreeConfig(depth=4, top_k=3, total_tokens=9)
VERIFY_SIZES = [2, 4, 8]
PROFILE = HardwareProfile(
    device="cpu", dtype="float32", num_threads=1, context_length=64,
    verify_tokens=[1, 4, 16], verify_seconds=[1.0, 1.5, 3.0], draft_step_seconds=0.1,
)


@pytest.fixture(scope="module")
def recording():
    target = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(target, 2)
    prompts = [prompt(7, seed=11), prompt(12, seed=12)]
    return record_replay(target, drafter, prompts, RECORDED, 16, feature_layers=(1, 4))


def _agent(observation: np.ndarray) -> int:
    """A deterministic agent: continue while the best step score is high; verify more when scores are high."""
    phase, depth, best = observation[0], observation[1], observation[3]
    if phase == 0:
        return int(best > -3.0 - 0.5 * depth)
    return int(np.clip((observation[3:] > -4.0).sum() // 3, 0, len(VERIFY_SIZES) - 1))


class _SameAgentPolicy(DraftPolicy):
    """The agent as an engine policy: the same observations, the same decisions."""

    def __init__(self, observe: ScoreObservation, verify_sizes: list[int] | None):
        self.observe, self.verify_sizes = observe, verify_sizes
        self.observations: list[np.ndarray] = []

    def tree_config(self, state):
        return RECORDED

    def continue_drafting(self, step):
        self.observations.append(self.observe(step))
        return _agent(self.observations[-1]) == 1

    def num_tokens_to_verify(self, info):
        if self.verify_sizes is None:
            return super().num_tokens_to_verify(info)
        self.observations.append(self.observe(info))
        return self.verify_sizes[_agent(self.observations[-1])]


@pytest.mark.parametrize("verify_sizes", [None, VERIFY_SIZES])
def test_draft_step_env_passes_check_env(recording, verify_sizes):
    env = DraftStepEnv(recording, PROFILE, verify_sizes=verify_sizes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert not [w for w in caught if "gymnasium" in str(w.filename)], [str(w.message) for w in caught]
    env.close()


def test_tree_config_env_passes_check_env(recording):
    env = TreeConfigEnv(recording, PROFILE, [TreeConfig(4, 3, 9), TreeConfig(2, 3, 4)], cycles_per_action=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert not [w for w in caught if "gymnasium" in str(w.filename)], [str(w.message) for w in caught]


@pytest.mark.parametrize("verify_sizes", [None, VERIFY_SIZES])
def test_draft_step_env_equals_replay_cycle(recording, verify_sizes):
    env = DraftStepEnv(recording, PROFILE, verify_sizes=verify_sizes)
    replay = ReplayEnvironment(recording, PROFILE)
    episodes = 0
    for p, trees in enumerate(recording.prompts):
        for position in range(len(trees)):
            policy = _SameAgentPolicy(env.observe, verify_sizes)
            expected = replay.replay_cycle(p, position, policy)
            if not policy.observations:  # the engine asks nothing this close to the end
                with pytest.raises(ValueError, match="asks nothing"):
                    env.reset(options={"prompt": p, "position": position})
                continue
            observation, info = env.reset(options={"prompt": p, "position": position})
            observations, terminated, rewards = [observation], False, []
            while not terminated:
                mask = env.action_masks().tolist()  # at the verify step: see test_action_masks_leave_out_verify_sizes_*
                assert mask == [True, True, False][: len(mask)] if info["phase"] == "depth" else mask[0]
                observation, reward, terminated, _, info = env.step(_agent(observations[-1]))
                rewards.append(reward)
                if not terminated:
                    observations.append(observation)
            np.testing.assert_array_equal(np.stack(observations), np.stack(policy.observations))
            assert info["cycle"] == replace(expected, policy_time=0.0)
            assert rewards[:-1] == [0.0] * (len(rewards) - 1)
            assert rewards[-1] == pytest.approx(tokens_per_second([expected]))
            episodes += 1
    assert episodes > 10


def test_draft_step_env_leaks_no_threads(recording):
    baseline = threading.active_count()
    env = DraftStepEnv(recording, PROFILE, verify_sizes=VERIFY_SIZES)
    env.reset(seed=0)
    env.step(1)
    assert threading.active_count() == baseline + 1  # the cycle waits for the agent
    env.reset(seed=1)  # abandons the running cycle
    assert threading.active_count() == baseline + 1
    env.close()
    assert threading.active_count() == baseline
    env.close()  # closing twice is fine

    env.reset(seed=2)
    terminated = False
    while not terminated:
        _, _, terminated, _, _ = env.step(0)
    assert threading.active_count() == baseline
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(0)

    env.reset(seed=3)
    del env
    gc.collect()
    assert threading.active_count() == baseline


def test_errors_in_the_cycle_reach_the_agent(recording):
    baseline = threading.active_count()
    env = DraftStepEnv(recording, PROFILE)
    env.reset(seed=0)
    env.replay.profile = replace(PROFILE)

    def unpriced(tokens):
        raise RuntimeError("verification time cannot be modelled")

    env.replay.profile.verify_time = unpriced
    with pytest.raises(RuntimeError, match="cannot be modelled"):
        while True:
            env.step(1)
    assert threading.active_count() == baseline
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(1)
    with pytest.raises(ValueError, match="outside the action space"):
        env.reset(seed=0)
        env.step(2)


def test_draft_step_env_refuses_what_it_cannot_replay(recording):
    with pytest.raises(ValueError, match="outside the recording"):
        DraftStepEnv(recording, PROFILE, config=TreeConfig(depth=5, top_k=3, total_tokens=9))
    with pytest.raises(ValueError, match="verify_sizes"):
        DraftStepEnv(recording, PROFILE, verify_sizes=[2, 9])
    with pytest.raises(ValueError, match="at least 2"):
        DraftStepEnv(recording, PROFILE, verify_sizes=[4])
    with pytest.raises(ValueError, match="decides nothing"):
        DraftStepEnv(recording, PROFILE, config=TreeConfig(depth=1, top_k=3, total_tokens=4))


def test_tree_config_env_replays_whole_generations(recording):
    configs = [TreeConfig(4, 3, 9), TreeConfig(2, 3, 4)]
    env = TreeConfigEnv(recording, PROFILE, configs, cycles_per_action=3)
    replay = ReplayEnvironment(recording, PROFILE)
    for action, config in enumerate(configs):
        expected = replay.replay_prompt(1, hfas.StaticTreePolicy(config.depth, config.top_k, config.total_tokens))
        observation, _ = env.reset(options={"prompt": 1})
        first = recording.prompts[1][0]
        expected_observation = np.concatenate([first.features[1], first.features[4], [first.context_length / 1000]])
        np.testing.assert_array_equal(observation, expected_observation.astype(np.float32))
        accepted, rewards, terminated = [], [], False
        while not terminated:
            observation, reward, terminated, _, info = env.step(action)
            accepted += info["accepted_lengths"]
            rewards.append(reward)
        assert accepted == [cycle.accepted_length for cycle in expected]
        chunks = [expected[i : i + 3] for i in range(0, len(expected), 3)]
        assert rewards == pytest.approx([tokens_per_second(chunk) for chunk in chunks])
        assert not observation[:-1].any() and observation[-1] > 0  # no features past the end
        with pytest.raises(RuntimeError, match="complete"):
            env.step(action)


def test_tree_config_env_refuses_an_observer_of_layers_the_recording_lacks(recording):
    from hf_adaptive_spec.environments.gym import FeatureObservation

    with pytest.raises(ValueError,
                       match=r"hidden states \[2, 3\] that the recording does not keep \(it has \[1, 4\]\)"):
        TreeConfigEnv(recording, PROFILE, [RECORDED], observe=FeatureObservation((1, 2, 3), 8, 100))


def test_a_position_outside_the_recording_is_refused_with_the_valid_range(recording):
    """A negative position counted from the end and replayed the last cycles as the one asked for: replay_cycle,
    DraftStepEnv.reset and MultiReplayEnvironment refuse it, naming the range."""
    from hf_adaptive_spec.environments import MultiReplayEnvironment

    replay, positions = ReplayEnvironment(recording, PROFILE), len(recording.prompts[0])
    policy = hfas.StaticTreePolicy(3, 3, 8)
    for position in (-1, positions):
        with pytest.raises(ValueError, match=rf"position {position} is outside prompt 0's {positions} recorded cycle "
                                             rf"starts: give 0 to {positions - 1}"):
            replay.replay_cycle(0, position, policy)
    with pytest.raises(ValueError, match=r"prompt -1 is outside the recording's 2 prompts: give 0 to 1"):
        replay.replay_cycle(-1, 0, policy)
    env = DraftStepEnv(recording, PROFILE, verify_sizes=VERIFY_SIZES)
    with pytest.raises(ValueError, match=rf"position -3 is outside prompt 0's {positions} recorded cycle starts"):
        env.reset(options={"prompt": 0, "position": -3})
    env.close()
    with pytest.raises(ValueError, match=r"position -1 is outside the .* cycle starts the recordings share"):
        MultiReplayEnvironment([recording], PROFILE).replay_cycle(0, -1, policy)


def test_observations_of_any_prompt_reset_names_lie_in_the_observation_space(recording):
    """The context bound was the chosen prompts' only, while reset(options={"prompt": p}) replays any recorded prompt:
    prompt 1's longer contexts fell outside the Box."""
    draft_env = DraftStepEnv(recording, PROFILE, verify_sizes=VERIFY_SIZES, prompts=[0])
    observations = []
    for position in range(len(recording.prompts[1])):
        try:
            observation, _ = draft_env.reset(options={"prompt": 1, "position": position})
        except ValueError:  # the engine asks nothing this close to the end
            continue
        observations.append(observation)
    draft_env.close()
    assert observations and all(draft_env.observation_space.contains(o) for o in observations)
    tree_env = TreeConfigEnv(recording, PROFILE, [TreeConfig(2, 3, 4)], cycles_per_action=3, prompts=[0])
    observations, terminated = [tree_env.reset(options={"prompt": 1})[0]], False
    while not terminated:
        observation, _, terminated, _, _ = tree_env.step(0)
        observations.append(observation)
    assert all(tree_env.observation_space.contains(o) for o in observations)


def test_reset_refuses_options_it_does_not_read_and_tree_config_env_a_step_before_reset(recording):
    """{'prompt': 1, 'postion': 9} started at position 0, {'promt': 1} drew a random episode, TreeConfigEnv ignored a
    position, and its step before any reset replayed prompt 0."""
    draft_env = DraftStepEnv(recording, PROFILE)
    for options in ({"prompt": 1, "postion": 9}, {"promt": 1}):
        with pytest.raises(ValueError, match=r"has keys it does not read: \['(postion|promt)'\]\. It reads "
                                             r"\['prompt', 'position'\]: pass only those"):
            draft_env.reset(options=options)
    draft_env.close()
    tree_env = TreeConfigEnv(recording, PROFILE, [RECORDED])
    with pytest.raises(RuntimeError, match=r"^No episode in progress: call reset\(\) before step\(\)"):
        tree_env.step(0)
    with pytest.raises(ValueError, match=r"does not read: \['position'\] \('position': an episode is a whole "
                                         r"generation, replayed from its first cycle\)\. It reads \['prompt'\]"):
        tree_env.reset(options={"prompt": 1, "position": 9})
    with pytest.raises(ValueError, match=r"does not read: \['promt'\]\. It reads \['prompt'\]: pass only those"):
        tree_env.reset(options={"promt": 1})
    with pytest.raises(RuntimeError, match=r"^No episode in progress: call reset\(\) before step\(\)"):
        DraftStepEnv(recording, PROFILE).step(0)


def test_action_masks_leave_out_verify_sizes_the_drafted_tree_cannot_fill(recording):
    """After stopping at depth 1 (3 candidates) the mask was [T, T, T] for sizes [2, 4, 8], though 4 and 8 both
    verified the 3: an allowed size now verifies more than the smaller allowed ones, a masked one as many as the
    largest allowed."""
    env = DraftStepEnv(recording, PROFILE, verify_sizes=VERIFY_SIZES)
    masked = 0
    for p, trees in enumerate(recording.prompts):
        for position in range(len(trees)):
            verified = []
            for action in range(len(VERIFY_SIZES)):
                try:
                    _, info = env.reset(options={"prompt": p, "position": position})
                except ValueError:  # the engine asks nothing this close to the end
                    break
                while info["phase"] == "depth":
                    _, _, _, _, info = env.step(0)  # stop: the shallowest tree
                mask = env.action_masks()
                verified.append(env.step(action)[4]["cycle"].verified_tokens)
            if not verified:
                continue
            allowed = [v for v, m in zip(verified, mask, strict=True) if m]
            assert allowed == sorted(set(allowed)), (p, position, verified, mask)
            assert all(v == allowed[-1] for v, m in zip(verified, mask, strict=True) if not m), (verified, mask)
            masked += int((~mask).sum())
    env.close()
    assert masked > 0


@pytest.mark.parametrize("index", [2, 5, -1])
def test_a_prompt_at_or_past_the_count_is_refused_by_replay_with_the_valid_range(recording, index):
    """replay(policy, [5]) raised a bare IndexError: the prompt's length was read before its range was checked (a
    negative index already got this message)."""
    from hf_adaptive_spec.environments import MultiReplayEnvironment

    policy = hfas.StaticTreePolicy(3, 3, 8)
    with pytest.raises(ValueError, match=rf"^prompt {index} is outside the recording's 2 prompts: give 0 to 1\."):
        ReplayEnvironment(recording, PROFILE).replay(policy, [index])
    with pytest.raises(ValueError, match=rf"^prompt {index} is outside the 2 prompts the recordings share: give 0"):
        MultiReplayEnvironment([recording], PROFILE).replay(policy, [index])
