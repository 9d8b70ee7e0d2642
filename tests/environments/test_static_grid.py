"""Ranking the static trees of a recording on a hardware profile: the cost curve decides the tree."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import ReplayEnvironment, record_replay
from hf_adaptive_spec.environments.static_grid import candidate_sizes, rank_static_trees
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile

RECORDED = TreeConfig(depth=4, top_k=3, total_tokens=9)


@pytest.fixture(scope="module")
def exact_recording():
    """The target's own copy as the drafter: its first choice is always the target's token."""
    target = tiny_model("llama")
    drafter = hfas.CausalLMDrafter(copy.deepcopy(target))
    return record_replay(target, drafter, [prompt(7, seed=3), prompt(12, seed=4)], RECORDED, 20)


def _profile(seconds: list[float], tokens=(1, 2, 16), buckets=None, draft_step=0.01) -> HardwareProfile:
    return HardwareProfile("cpu", "float32", 1, 64, verify_tokens=list(tokens), verify_seconds=seconds,
                           draft_step_seconds=draft_step, path="compiled" if buckets else "eager", buckets=buckets)


def test_a_flat_curve_picks_the_most_accepting_tree_and_a_steep_one_plain_steps(exact_recording):
    """Verification at one price and drafting almost free: the tree that accepts the most wins (trees
    of equal τ tie); verification at 100x one token: plain steps."""
    flat = rank_static_trees(exact_recording, _profile([1.0, 1.0, 1.0], draft_step=1e-6))
    steep = rank_static_trees(exact_recording, _profile([1.0, 100.0, 100.0]))
    assert flat[0].tau == max(tree.tau for tree in flat) > 2.0 and flat[0].depth > 0
    assert steep[0].depth == 0 and steep[0].tau == 1.0
    for ranked in (flat, steep):
        assert [tree.tokens_per_second for tree in ranked] == sorted(
            (tree.tokens_per_second for tree in ranked), reverse=True
        )


def test_each_ranked_tree_is_what_its_static_policy_replays_to(exact_recording):
    profile = _profile([1.0, 1.2, 2.0])
    environment = ReplayEnvironment(exact_recording, profile)
    for tree in rank_static_trees(exact_recording, profile)[:5]:
        replayed = environment.replay(tree.policy())
        assert tree.tau == replayed.mean_accepted_tokens  # exact; the time adds the policy's own, measured
        assert tree.tokens_per_second == pytest.approx(replayed.tokens_per_second, rel=1e-3)


def test_a_bucketed_profile_ranks_one_size_per_bucket(exact_recording):
    """On the static path a tree costs its bucket's time, and a bigger tree of the same depth accepts
    at least as much: only each bucket's largest size (and the recording's own limit) is worth ranking."""
    profile = _profile([1.0, 1.0, 1.1], tokens=(1, 4, 8), buckets=[4, 8])
    assert candidate_sizes(profile, 9) == [4, 8] and candidate_sizes(profile, 6) == [4, 6]
    assert candidate_sizes(profile, 3) == [3] and candidate_sizes(_profile([1, 1, 1]), 4) == [2, 3, 4]
    sizes = {tree.total_tokens for tree in rank_static_trees(exact_recording, profile) if tree.depth}
    assert sizes == {4, 8}


def test_each_tree_is_ranked_once_under_its_own_depth(exact_recording):
    """A tree of total_tokens nodes is at most total_tokens - 1 deep: depth 4 with 2 tokens is depth 1's tree."""
    ranked = rank_static_trees(exact_recording, _profile([1.0, 1.2, 2.0]))
    assert TreeConfig(4, 3, 2).reachable_depth == 1 and TreeConfig(2, 3, 8).reachable_depth == 2
    assert all(tree.depth <= tree.total_tokens - 1 for tree in ranked)
    shapes = [(tree.depth, tree.total_tokens) for tree in ranked]
    assert len(shapes) == len(set(shapes)) and (1, 2) in shapes and (4, 2) not in shapes


def test_each_lookup_branch_length_is_ranked_and_depth_0_with_a_branch_is_the_branch_alone(exact_recording):
    """rank_over_recordings ranks every tree with each branch length asked for; each ranked tree is what its
    static policy replays to with that branch, and depth 0 with a branch verifies the lookup chain alone."""
    from hf_adaptive_spec.environments.static_grid import lookup_counts_from_text, rank_over_recordings

    profile = _profile([1.0, 1.2, 2.0])
    ranked = rank_over_recordings([exact_recording], profile, lookup_counts_from_text("2,0"))
    assert {tree.lookup_tokens for tree in ranked} == {0, 2}
    assert sum(tree.is_plain for tree in ranked) == 1
    alone = next(tree for tree in ranked if tree.depth == 0 and tree.lookup_tokens == 2)
    plain = next(tree for tree in ranked if tree.is_plain)
    assert plain.tau == 1.0 and alone.tau > 1.0  # the recording's generations repeat themselves: the branch is accepted
    first = [tree for tree in ranked if tree.lookup_first]
    # each drafted tree, drafted where lookup missed
    assert first and all(tree.depth and tree.lookup_tokens == 2 for tree in first)
    assert type(first[0].policy()).__name__ == "LookupFirstPolicy"
    for tree in (alone, first[0], *ranked[:3]):
        replayed = ReplayEnvironment(exact_recording, profile, lookup_tokens=tree.lookup_tokens).replay(tree.policy())
        assert tree.tau == replayed.mean_accepted_tokens


def test_a_bucketed_profile_with_a_lookup_branch_also_ranks_the_trees_that_fill_a_bucket_with_it():
    profile = _profile([1.0, 1.0, 1.1], tokens=(1, 4, 8), buckets=[4, 8])
    assert candidate_sizes(profile, 9, lookup_tokens=1) == [3, 4, 7, 8]
    assert candidate_sizes(profile, 9, lookup_tokens=0) == candidate_sizes(profile, 9) == [4, 8]


@pytest.mark.parametrize("text", ["-1", "1,x", ""])
def test_lookup_lengths_are_read_as_distinct_ascending_lengths_or_refused(text):
    from hf_adaptive_spec.environments.static_grid import lookup_counts_from_text

    assert lookup_counts_from_text("4,0,1,4") == (0, 1, 4)
    with pytest.raises(ValueError, match="expected branch lengths >= 0"):
        lookup_counts_from_text(text)


@pytest.fixture(scope="module")
def easy_and_hard():
    """Recording A: one prompt drafted by the target's own copy (always right); B: four prompts drafted by one layer."""
    target = tiny_model("llama")
    easy = record_replay(target, hfas.CausalLMDrafter(copy.deepcopy(target)), [prompt(9, seed=5)], RECORDED, 16)
    hard = record_replay(target, hfas.CausalLMDrafter.from_target_layers(target, 1),
                         [prompt(9, seed=s) for s in (6, 7, 8, 9)], RECORDED, 16)
    # two drafters stand in for easy and hard prompts of one: their digests are left out, as in a recording made
    # before they were kept, or the recordings would be refused where they are pooled (test_recording_models.py)
    return target, replace(easy, drafter_weights=None), replace(hard, drafter_weights=None)


def test_several_recordings_rank_every_tree_on_all_of_them(easy_and_hard, monkeypatch):
    """Each tree is ranked once, on every recording given (those of one top_k pooled): ranked on each alone, the
    easy recording's trees beat plain steps measured on the hard one. A shipped policy replays on the same data."""
    from hf_adaptive_spec.environments import ReplayRecording
    from hf_adaptive_spec.environments.static_grid import rank_over_recordings
    from hf_adaptive_spec.profiling import ranking

    _, easy, hard = easy_and_hard
    profile = _profile([0.010, 0.016, 0.040], tokens=(1, 4, 16), draft_step=0.002)
    both = ReplayRecording.concatenate([easy, hard])
    ranked = rank_over_recordings([easy, hard], profile)
    shapes = [(tree.depth, tree.top_k, tree.total_tokens) for tree in ranked]
    assert len(shapes) == len(set(shapes))  # each tree once
    pooled = {(tree.depth, tree.total_tokens): tree.tau for tree in rank_static_trees(both, profile)}
    assert {(tree.depth, tree.total_tokens): tree.tau for tree in ranked} == pooled
    static = hfas.StaticTreePolicy(3, 3, 6)
    static.mark_trained_on(profile.cost_curve())
    monkeypatch.setattr(ranking.AutoDraftPolicy, "from_pretrained", lambda *args, **kwargs: static)
    entry = ranking.shipped_policy_replay("ltd", profile, [easy, hard], 0)
    assert entry["tau"] == ReplayEnvironment(both, profile).replay(static).mean_accepted_tokens
    assert entry["tau"] != ReplayEnvironment(easy, profile).replay(static).mean_accepted_tokens


def test_recordings_of_several_top_k_are_ranked_on_the_same_prompts_or_refused(easy_and_hard):
    """One recording per top_k: each tree replays on its top_k's recording, over the positions all of them hold
    (MultiReplayEnvironment); recordings of other prompts per top_k are refused, not ranked unevenly."""
    from hf_adaptive_spec.environments import MultiReplayEnvironment
    from hf_adaptive_spec.environments.static_grid import rank_over_recordings

    target, _, hard = easy_and_hard
    drafter = hfas.CausalLMDrafter.from_target_layers(target, 1)
    prompts = [prompt(9, seed=s) for s in (6, 7, 8, 9)]
    narrow = record_replay(target, drafter, prompts, TreeConfig(3, 2, 5), 16)
    profile = _profile([0.010, 0.016, 0.040], tokens=(1, 4, 16), draft_step=0.002)
    ranked = rank_over_recordings([hard, narrow], profile)
    assert {tree.top_k for tree in ranked if tree.depth} == {2, 3}
    together = MultiReplayEnvironment([hard, narrow], profile)
    for tree in ranked[:4]:
        assert tree.tau == together.replay(tree.policy()).mean_accepted_tokens
    other = record_replay(target, drafter, [prompt(9, seed=s) for s in (16, 17)], TreeConfig(3, 2, 5), 16)
    with pytest.raises(ValueError, match=r"several top_k \(\[2, 3\]\) are ranked together only on the same prompts"):
        rank_over_recordings([hard, other], profile)
