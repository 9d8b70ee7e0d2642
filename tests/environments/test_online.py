"""Live generation cycles, in replay's result structure, agree with replay for greedy decoding."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.environments import OnlineEnvironment, ReplayEnvironment, record_replay
from hf_adaptive_spec.policies.base import DraftPolicy, TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile

torch.set_num_threads(1)

RECORDED = TreeConfig(depth=4, top_k=3, total_tokens=9)
MAX_NEW = 20
PROFILE = HardwareProfile(
    device="cpu", dtype="float32", num_threads=1, context_length=64,
    verify_tokens=[1, 16], verify_seconds=[1.0, 3.0], draft_step_seconds=0.1,
)


class AdaptiveCountingPolicy(DraftPolicy):
    """Reads a target feature, stops on unlikely steps, verifies by score, and counts the feedback it observes."""

    feature_layers = (2,)

    def __init__(self):
        self.observed = 0

    def tree_config(self, state):
        assert state.features[2].shape == (64,)
        return TreeConfig(depth=4, top_k=3, total_tokens=9)

    def continue_drafting(self, step):
        return bool(step.step_scores.max() > -2.5 - 0.5 * step.depth)

    def num_tokens_to_verify(self, info):
        return int((info.scores > -3.0).sum())

    def observe(self, feedback):
        self.observed += 1


def _eagle3(target):
    torch.manual_seed(1)
    return hfas.Eagle3Drafter(Eagle3DraftModel.from_target(target, initializer_range=0.3))


@pytest.mark.parametrize("make_drafter", [lambda t: hfas.CausalLMDrafter.from_target_layers(t, 2), _eagle3])
def test_online_cycles_equal_replayed_cycles(make_drafter):
    target = tiny_model("llama")
    prompts = [prompt(7, seed=21), prompt(11, seed=22)]
    recording = record_replay(target, make_drafter(target), prompts, RECORDED, MAX_NEW, feature_layers=(2,))
    replay = ReplayEnvironment(recording, PROFILE)
    online = OnlineEnvironment(target, make_drafter(target), prompts, MAX_NEW)
    for policy in (hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=6), AdaptiveCountingPolicy()):
        live = online.run(policy)
        replayed = replay.replay(policy)
        for live_cycles, replayed_cycles in zip(live.cycles, replayed.cycles, strict=True):
            assert [c.accepted_length for c in live_cycles] == [c.accepted_length for c in replayed_cycles]
            assert [c.verified_tokens for c in live_cycles] == [c.verified_tokens for c in replayed_cycles]
            assert [c.draft_depth for c in live_cycles] == [c.draft_depth for c in replayed_cycles]
            assert [c.context_length for c in live_cycles] == [c.context_length for c in replayed_cycles]
        assert live.mean_accepted_tokens == replayed.mean_accepted_tokens
        assert all(c.verify_time > 0 for c in live.all_cycles)  # measured, not modelled
        assert sum(c.draft_time for c in live.all_cycles) > 0  # (the last cycle may draft nothing)
    assert policy.observed == len(live.all_cycles) + len(replayed.all_cycles)  # observe reaches the wrapped policy


def test_a_live_cycle_keeps_what_it_committed_as_a_replayed_cycle():
    from hf_adaptive_spec.environments.replay import ReplayedCycle
    from hf_adaptive_spec.policies.base import CycleFeedback

    timing = dict(draft_time=0.1, verify_time=0.2, policy_time=0.0)
    # an end-of-sequence token after 2 of the 5
    ended = CycleFeedback(context_length=9, draft_depth=4, verified_tokens=8, accepted_length=4,
                          drafter_accepted_length=4, committed_tokens=2, **timing)
    cycle = ReplayedCycle.from_feedback(ended)
    assert (cycle.committed_tokens, cycle.accepted_length, cycle.feedback()) == (2, 4, ended)
    whole = CycleFeedback(context_length=9, draft_depth=4, verified_tokens=8, accepted_length=4,
                          drafter_accepted_length=4, committed_tokens=5, **timing)
    assert (ReplayedCycle.from_feedback(whole).remaining_tokens is None
            and ReplayedCycle.from_feedback(whole).committed_tokens == 5)


@pytest.mark.parametrize("index", [2, -1])
def test_a_prompt_outside_the_online_environments_is_refused_naming_the_range(index):
    """2 raised a bare IndexError; -1 generated the last prompt under another index, where replay refuses both."""
    target = tiny_model("llama")
    online = OnlineEnvironment(target, _eagle3(target), [prompt(7, seed=21), prompt(11, seed=22)], 4)
    with pytest.raises(ValueError, match=f"prompt {index} is outside the environment's 2 prompts: give 0 to 1"):
        online.run(hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=4), [index])


@pytest.mark.parametrize("prompts, max_new_tokens, message", [
    ([torch.arange(1, 8)], 4, r"prompts\[0\] is a torch.int64 tensor of shape \[7\]; each prompt must be a \[1, T\] "
                              r"LongTensor .* tokenizer\(text, return_tensors='pt'\).input_ids"),
    ([[5, 6, 7]], 4, r"prompts\[0\] is \[5, 6, 7\]; each prompt must be a \[1, T\] LongTensor"),
    ([torch.ones(2, 7, dtype=torch.long)], 4, r"shape \[2, 7\]; each prompt must be a \[1, T\] LongTensor"),
    ([torch.ones(1, 7)], 4, r"prompts\[0\] is a torch.float32 tensor of shape \[1, 7\]"),
    ([], 4, r"OnlineEnvironment needs at least one prompt: pass prompts=\[tokenizer\(text"),
    ([torch.ones(1, 7, dtype=torch.long)], 2.5, r"max_new_tokens must be an int >= 1 .* got 2.5"),
    ([torch.ones(1, 7, dtype=torch.long)], 0, r"max_new_tokens must be an int >= 1 .* got 0"),
])
def test_online_inputs_are_checked_when_the_environment_is_made(prompts, max_new_tokens, message):
    """A 1-D prompt or a list of ints raised IndexError / AttributeError inside generate at run(); 2.5 new tokens
    were accepted; no prompts gave a run() whose error told to record with `hf-adaptive-spec record`."""
    target = tiny_model("llama")
    with pytest.raises(ValueError, match=message):
        OnlineEnvironment(target, hfas.CausalLMDrafter.from_target_layers(target, 2), prompts, max_new_tokens)
    online = OnlineEnvironment(target, hfas.CausalLMDrafter.from_target_layers(target, 2), [prompt(7, seed=21)], 4)
    with pytest.raises(ValueError, match=r"run\(policy, prompts=\[\]\) chooses no prompt: pass indices 0 to 0"):
        online.run(hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=4), [])
