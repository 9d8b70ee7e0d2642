"""Replay of recorded greedy generations agrees with live speculative generate, cycle by cycle."""

from __future__ import annotations

import pytest
import torch
from tiny_models import PlainStepsBetweenTrees, prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core import full_tree_size
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.environments import ReplayEnvironment, ReplayRecording, ReplayTree, record_replay
from hf_adaptive_spec.environments.online import _FeedbackRecorder
from hf_adaptive_spec.policies.base import DraftPolicy, TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile

RECORDED = TreeConfig(depth=4, top_k=3, total_tokens=9)
MAX_NEW = 24


class ScoreThresholdPolicy(DraftPolicy):
    """Stops when the step's best candidate is unlikely and verifies a size that depends on the scores."""

    def tree_config(self, state):
        return TreeConfig(depth=4, top_k=3, total_tokens=9)

    def continue_drafting(self, step):
        return bool(step.step_scores.max() > -2.5 - 0.5 * step.depth)

    def num_tokens_to_verify(self, info):
        return int((info.scores > -3.0).sum())


def _profile() -> HardwareProfile:
    """Reading ``n`` unread committed tokens costs ``n`` seconds (the catch-up table is the identity), so a
    replayed cycle's draft time tells how many tokens its first step read; each later level costs 0.1 s."""
    return HardwareProfile(
        device="cpu", dtype="float32", num_threads=1, context_length=64,
        verify_tokens=[1, 4, 16], verify_seconds=[1.0, 1.5, 3.0], draft_step_seconds=0.1,
        catch_up_tokens=[1.0, 1000.0], catch_up_seconds=[1.0, 1000.0],
    )


def _count_reads(drafter) -> list[int]:
    """Per ``begin_tree`` call of ``drafter``, the tokens committed since its previous one (the prompt's at the
    first)."""
    reads, seen, begin_tree = [], [1], drafter.begin_tree

    def counting(context):
        reads.append(context.input_ids.shape[1] - seen[0])
        seen[0] = context.input_ids.shape[1]
        return begin_tree(context)

    drafter.begin_tree = counting
    return reads


def _drafters(target):
    torch.manual_seed(1)
    eagle3 = hfas.Eagle3Drafter(Eagle3DraftModel.from_target(target, initializer_range=0.3))
    return {
        "early-exit": hfas.CausalLMDrafter.from_target_layers(target, 2),
        "eagle3": eagle3,
        "dvi-shared-cache": hfas.DVIDrafter(target, exit_layer=2),
    }


POLICIES = {
    "chain": hfas.StaticTreePolicy(depth=4, top_k=3, total_tokens=5),
    "shallow": hfas.StaticTreePolicy(depth=2, top_k=3, total_tokens=9),
    "full": hfas.StaticTreePolicy(depth=4, top_k=3, total_tokens=9),
    "adaptive": ScoreThresholdPolicy(),
    "plain-steps-between-trees": PlainStepsBetweenTrees(RECORDED),
    "lookup-first": hfas.LookupFirstPolicy(depth=4, top_k=3, total_tokens=9),  # reads the branch's match
}


@pytest.mark.parametrize(
    "drafter_name, lookup_tokens",
    [("early-exit", 0), ("eagle3", 0), ("dvi-shared-cache", 0), ("early-exit", 4), ("eagle3", 4)],
)
def test_replay_matches_live_cycles(drafter_name, lookup_tokens, tmp_path):
    target = tiny_model("llama")
    prompts = [prompt(7, seed=11), prompt(15, seed=12)]
    recording = record_replay(target, _drafters(target)[drafter_name], prompts, RECORDED, MAX_NEW)
    recording.save(tmp_path)
    environment = ReplayEnvironment(ReplayRecording.load(tmp_path), _profile(), lookup_tokens=lookup_tokens)
    tree_only = ReplayEnvironment(recording, _profile())
    for name, policy in POLICIES.items():
        for index, ids in enumerate(prompts):
            recorder, drafter = _FeedbackRecorder(policy), _drafters(target)[drafter_name]
            reads = _count_reads(drafter)
            live = target.generate(
                ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True,
                assistant_model=drafter, assistant_policy=recorder, prompt_lookup_num_tokens=lookup_tokens or None,
            ).speculation
            replayed = environment.replay_prompt(index, policy)
            # each drafting cycle is charged for the tokens the live drafter read, the prompt's included
            read = [round(c.draft_time - 0.1 * (c.draft_levels - 1), 6) for c in replayed if c.drafted]
            assert read == reads and not any(c.draft_time for c in replayed if not c.drafted), name
            assert [c.accepted_length for c in replayed] == live.accepted_lengths, name
            drafter_accepted = [f.drafter_accepted_length for f in recorder.feedback]
            assert [c.drafter_accepted_length for c in replayed] == drafter_accepted, name
            assert [c.draft_depth for c in replayed] == live.draft_depths, name
            assert [c.verified_tokens for c in replayed] == live.verified_tokens, name
            if name == "lookup-first" and lookup_tokens:  # the match decided some cycles: drafted nothing there
                assert 0 in live.draft_depths, name
        if lookup_tokens and name != "lookup-first":
            # the branch's nodes were verified, and accept at least what the tree alone does
            with_branch, without = environment.replay(policy), tree_only.replay(policy)
            verified = [sum(c.verified_tokens for c in result.all_cycles) for result in (with_branch, without)]
            assert verified[0] > verified[1], name
            assert with_branch.mean_accepted_tokens >= without.mean_accepted_tokens, name


def test_replay_counts_no_token_past_the_end_of_sequence_as_generate_does():
    """An end-of-sequence token inside an accepted path ends the generation: stats and τ count up to it, the
    policy observes what verification accepted (as live)."""
    import copy

    target, ids = tiny_model("llama"), prompt(7, seed=11)
    perfect = copy.deepcopy(target)  # accepts whole chains, so the token lands inside an accepted path
    policy = hfas.StaticTreePolicy(depth=6, top_k=3, total_tokens=16)
    generated = target.generate(ids, max_new_tokens=20, do_sample=False)[0, ids.shape[1]:].tolist()
    eos = generated[2]
    assert eos not in generated[:2]
    recording = record_replay(target, hfas.CausalLMDrafter(perfect), [ids], TreeConfig(6, 3, 16), 20,
                              eos_token_ids=(eos,))
    recorder = _FeedbackRecorder(policy)
    live = target.generate(ids, max_new_tokens=20, do_sample=False, return_dict_in_generate=True, eos_token_id=eos,
                           assistant_model=hfas.CausalLMDrafter(perfect), assistant_policy=recorder)
    replayed = ReplayEnvironment(recording, _profile()).replay(policy)
    cycles = replayed.all_cycles
    assert [c.committed_tokens - 1 for c in cycles] == live.speculation.accepted_lengths == [1]
    assert [c.accepted_length for c in cycles] == [f.accepted_length for f in recorder.feedback]
    assert cycles[0].accepted_length > 1  # verification accepted past the end-of-sequence token
    assert replayed.mean_accepted_tokens == live.speculation.mean_accepted_tokens == 2.0
    assert 1 + sum(c.committed_tokens for c in cycles) == live.sequences.shape[1] - ids.shape[1]


@pytest.mark.parametrize("lookup_tokens, total_tokens", [(0, 12), (4, 8)])
def test_replay_on_a_static_path_profile_caps_trees_to_its_largest_bucket_as_generate_does(lookup_tokens, total_tokens):
    from hf_adaptive_spec.generation.static_path import fast_path

    target = tiny_model("llama")
    fast_path(target, buckets=(4, 8))
    prompts = [torch.tensor([[5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6]]), prompt(12, seed=3)]  # the first repeats itself
    drafter = lambda: hfas.CausalLMDrafter.from_target_layers(target, 2)  # noqa: E731
    recording = record_replay(target, drafter(), prompts, TreeConfig(depth=4, top_k=3, total_tokens=12), MAX_NEW)
    profile = HardwareProfile(device="cpu", dtype="float32", num_threads=1, context_length=64, path="static",
                              buckets=[4, 8], verify_tokens=[1, 4, 8, 16], verify_seconds=[1.0, 1.5, 3.0, 6.0],
                              draft_step_seconds=0.1)
    environment = ReplayEnvironment(recording, profile, lookup_tokens=lookup_tokens)
    policy = hfas.StaticTreePolicy(depth=4, top_k=3, total_tokens=total_tokens)
    for index, ids in enumerate(prompts):
        live = target.generate(ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True,
                               cache_implementation="static", prompt_lookup_num_tokens=lookup_tokens or None,
                               assistant_model=drafter(), assistant_policy=policy).speculation
        assert live.capped_trees > 0
        replayed = environment.replay_prompt(index, policy)
        assert [c.verified_tokens for c in replayed] == live.verified_tokens
        assert [c.accepted_length for c in replayed] == live.accepted_lengths


def test_each_replayed_prompt_begins_a_generation_as_each_generate_call_does():
    class CountsGenerations(hfas.StaticTreePolicy):
        generations = 0

        def begin_generation(self) -> None:
            self.generations += 1

    target = tiny_model("llama")
    prompts = [prompt(7, seed=11), prompt(15, seed=12)]
    recording = record_replay(target, _drafters(target)["early-exit"], prompts, RECORDED, MAX_NEW)
    policy = CountsGenerations(depth=2, top_k=3, total_tokens=5)
    ReplayEnvironment(recording, _profile()).replay(policy)
    assert policy.generations == 2
    recorder = _FeedbackRecorder(policy)
    target.generate(prompts[0], max_new_tokens=4, do_sample=False, assistant_model=_drafters(target)["early-exit"],
                    assistant_policy=recorder)
    assert policy.generations == 3  # through the online environment's recorder too


def _repeating_recording() -> ReplayRecording:
    """A depth-1 recording whose generation continues the prompt's pattern 1 2 3 4 5; the drafter always proposes 9."""
    prompt_ids, generated = [1, 2, 3, 4, 5, 1, 2], [3, 4, 5, 1, 2, 3, 4]
    sequence = prompt_ids + generated
    trees = [
        ReplayTree(context_length=len(prompt_ids) + t + 1, tokens=[sequence[len(prompt_ids) + t], 9], parents=[-1, 0],
                   depths=[0, 1], scores=[0.0, -0.1], target_next=[sequence[len(prompt_ids) + t + 1], -1])
        for t in range(len(generated) - 1)
    ]
    return ReplayRecording(TreeConfig(depth=1, top_k=1, total_tokens=2), 10, len(generated), [trees],
                           prompt_ids=[prompt_ids])


def test_replayed_lookup_branch_accepts_what_the_context_repeats():
    recording = _repeating_recording()
    policy = hfas.StaticTreePolicy(depth=1, top_k=1, total_tokens=2)
    assert [c.accepted_length for c in ReplayEnvironment(recording, _profile()).replay_prompt(0, policy)] == [0] * 6
    cycles = ReplayEnvironment(recording, _profile(), lookup_tokens=3).replay_prompt(0, policy)
    # "2 3" looks up "4 5 1" (all accepted); then "1 2" looks up "3 4 5", cut to the one token left
    assert [(c.accepted_length, c.verified_tokens) for c in cycles] == [(3, 5), (1, 3)]
    assert [c.drafter_accepted_length for c in cycles] == [0, 0]  # the lookup chain's, not the drafter's 9


def test_the_replay_finds_each_cycles_lookup_chain_once_however_often_it_is_replayed(monkeypatch):
    import hf_adaptive_spec.environments.replay as replay

    recording = _repeating_recording()
    searches, search = [], replay.lookup_continuation
    monkeypatch.setattr(replay, "lookup_continuation", lambda *args: searches.append(args) or search(*args))
    environment = ReplayEnvironment(recording, _profile(), lookup_tokens=3)
    policy = hfas.StaticTreePolicy(depth=1, top_k=1, total_tokens=2)
    first = [(c.accepted_length, c.verified_tokens) for c in environment.replay_prompt(0, policy)]
    assert first == [(3, 5), (1, 3)] and len(searches) == 2
    for _ in range(3):  # later epochs, and the state a policy is shown, read the chain found the first time
        assert [(c.accepted_length, c.verified_tokens) for c in environment.replay_prompt(0, policy)] == first
        assert [len(environment.lookup_chain(0, position)) for position in (0, 4)] == [3, 1]
    assert len(searches) == 2
    chain = environment.lookup_chain(0, 0)
    chain.append(7)  # a caller's list is its own
    assert environment.lookup_chain(0, 0) == [4, 5, 1]


def test_replaying_a_lookup_branch_needs_the_prompt_ids():
    target = tiny_model("llama")
    recording = record_replay(target, _drafters(target)["early-exit"], [prompt(7, seed=2)], RECORDED, 8)
    recording.prompt_ids = []  # as in recordings made before prompt ids were kept
    with pytest.raises(ValueError, match="record it again"):
        ReplayEnvironment(recording, _profile(), lookup_tokens=4)


def test_recording_holds_the_greedy_generation():
    target = tiny_model("llama")
    ids = prompt(9, seed=4)
    expected = target.generate(ids, max_new_tokens=MAX_NEW, do_sample=False)[0, ids.shape[1]:].tolist()
    trees = record_replay(target, _drafters(target)["early-exit"], [ids], RECORDED, MAX_NEW).prompts[0]
    assert len(trees) == MAX_NEW - 1  # the first token comes from the prefill
    # the whole expansion: the root, 3 children, then 3 x 3 candidates at each of 3 more levels
    assert {len(tree.tokens) for tree in trees} == {1 + 3 + 3 * 9} == {full_tree_size(RECORDED.depth, RECORDED.top_k)}
    assert [tree.target_next[0] for tree in trees] == expected[1:]
    assert [tree.context_length for tree in trees] == list(range(ids.shape[1] + 1, ids.shape[1] + MAX_NEW))
    recording = ReplayRecording(RECORDED, 100, MAX_NEW, [trees], prompt_ids=[ids[0].tolist()])
    assert recording.sequence(0) == target.generate(ids, max_new_tokens=MAX_NEW, do_sample=False)[0].tolist()


def test_replay_times_come_from_the_profile():
    target = tiny_model("llama")
    recording = record_replay(target, _drafters(target)["early-exit"], [prompt(7, seed=2)], RECORDED, 12)
    environment, policy = (
        ReplayEnvironment(recording, _profile()),
        hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=4),
    )
    cycle = environment.replay_cycle(0, 0, policy)
    assert cycle.verified_tokens == 4
    # three levels drafted, whatever the pruning kept: the first reads the 7-token prompt (1 s per token),
    # then 0.1 s each
    assert cycle.draft_time == pytest.approx(7.2)
    assert cycle.verify_time == pytest.approx(1.5)
    assert environment.replay_cycle(0, 2, policy, unread_tokens=3).draft_time == pytest.approx(3.2)
    # unknown: as after a cycle of one token
    assert environment.replay_cycle(0, 2, policy).draft_time == pytest.approx(1.2)


def test_plain_decoding_step_costs_one_token_verification_and_no_draft():
    target = tiny_model("llama")
    recording = record_replay(target, _drafters(target)["early-exit"], [prompt(7, seed=2)], RECORDED, 12)
    cycle = ReplayEnvironment(recording, _profile()).replay_cycle(
        0, 0, hfas.StaticTreePolicy(depth=0, top_k=3, total_tokens=4)
    )
    assert (cycle.verified_tokens, cycle.accepted_length, cycle.draft_depth) == (1, 0, 0)
    assert cycle.draft_time == 0.0
    assert cycle.verify_time == pytest.approx(1.0)


def test_recording_plain_steps_is_refused():
    target = tiny_model("llama")
    with pytest.raises(ValueError, match="record with depth >= 1"):
        record_replay(target, _drafters(target)["early-exit"], [prompt(7, seed=2)],
                      TreeConfig(depth=0, top_k=3, total_tokens=1), 8)


def test_policies_outside_the_recording_are_refused():
    target = tiny_model("llama")
    recording = record_replay(target, _drafters(target)["early-exit"], [prompt(7, seed=2)], RECORDED, 8)
    environment = ReplayEnvironment(recording, _profile())
    for policy in (hfas.StaticTreePolicy(depth=5, top_k=3, total_tokens=9),
                   hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=9),
                   hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=12)):
        with pytest.raises(ValueError, match="outside the recording"):
            environment.replay_cycle(0, 0, policy)


def test_a_recording_ends_where_generate_does_at_the_models_own_end_of_sequence_token():
    """Left out, ``eos_token_ids`` is the model's own (``generate`` stops there): the replay of a recording made
    with the defaults commits what the live generation commits; ``()`` records past it."""
    from hf_adaptive_spec.environments.replayed import committed_tokens

    target = tiny_model("llama")
    ids = prompt(7, seed=11)
    plain = target.generate(ids, max_new_tokens=20, do_sample=False)[0, ids.shape[1]:].tolist()
    eos = plain[5]
    target.generation_config.eos_token_id = eos
    policy = hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=8)
    live = target.generate(ids, max_new_tokens=20, do_sample=False, return_dict_in_generate=True,
                           assistant_model=hfas.CausalLMDrafter.from_target_layers(target, 2), assistant_policy=policy)
    drafter = hfas.CausalLMDrafter.from_target_layers(target, 2)
    recording = record_replay(target, drafter, [ids], TreeConfig(3, 3, 8), 20)
    assert recording.eos_token_ids == (eos,)
    profile = HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.5], draft_step_seconds=0.1)
    replayed = ReplayEnvironment(recording, profile).replay(policy)
    # the prompt's forward commits the first token, the cycles the rest, up to the end-of-sequence token
    assert 1 + committed_tokens(replayed.all_cycles) == live.sequences.shape[1] - ids.shape[1] == plain.index(eos) + 1
    unbounded = record_replay(target, hfas.CausalLMDrafter.from_target_layers(target, 2), [ids], TreeConfig(3, 3, 8),
                              20, eos_token_ids=())
    assert unbounded.num_positions > recording.num_positions
