"""RADAR: the policy in live generate, the replay-built dataset, the rewards and the trainer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import ReplayEnvironment, ReplayRecording, ReplayTree, record_replay
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.policies.radar import CONTINUE, SKIP, STOP, RadarPolicy, beam_scores
from hf_adaptive_spec.policies.serialization import AutoDraftPolicy
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training.radar import (
    LatencyModel,
    RadarConfig,
    RadarDataset,
    RadarTrainer,
    build_radar_dataset,
    held_out_metrics,
    return_matrix,
    speed_matrix,
)
from hf_adaptive_spec.training.radar.script import RadarScriptArguments, main

torch.set_num_threads(1)

TREE = TreeConfig(depth=4, top_k=3, total_tokens=9)
MAX_NEW = 24
REPO = Path(__file__).resolve().parents[2]


def _profile(draft: float = 0.1, policy: float = 0.01) -> HardwareProfile:
    return HardwareProfile(
        device="cpu", dtype="float32", num_threads=1, context_length=64,
        verify_tokens=[1, 4, 16], verify_seconds=[1.0, 1.5, 3.0], draft_step_seconds=draft, policy_call_seconds=policy,
    )


@pytest.fixture(scope="module")
def setup():
    target = tiny_model("llama")
    prompts = [prompt(7, seed=11), prompt(12, seed=12), prompt(9, seed=13), prompt(5, seed=14)]
    recording = record_replay(target, hfas.CausalLMDrafter.from_target_layers(target, 2), prompts, TREE, MAX_NEW)
    return target, prompts, recording, build_radar_dataset(recording)


def _live(target, ids, policy, **generate_kwargs):
    drafter = hfas.CausalLMDrafter.from_target_layers(target, 2)
    return target.generate(ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True,
                           assistant_model=drafter, assistant_policy=policy, **generate_kwargs)


def _checked_live_cycles(target, ids, policy, environment: ReplayEnvironment, prompt_index: int, **generate_kwargs):
    """Live ``generate``'s speculation statistics for a logging policy (its ``cycles`` reset first),
    after checking the output is stock's and the replay gives the same accepted lengths."""
    policy.cycles = []
    live = _live(target, ids, policy, **generate_kwargs)
    assert live.sequences.tolist() == target.generate(ids, max_new_tokens=MAX_NEW, do_sample=False).tolist()
    stats = live.speculation
    assert [c.accepted_length for c in environment.replay_prompt(prompt_index, policy)] == stats.accepted_lengths
    return stats


def _cycle_rows(dataset: RadarDataset, prompt_index: int, accepted_lengths: list[int]) -> list[int | None]:
    """Dataset row of each live cycle (None near the end of the generation, where the dataset has none)."""
    rows = {(int(p), int(s)): i for i, (p, s) in enumerate(zip(dataset.prompt_index, dataset.position))}
    positions = [sum(a + 1 for a in accepted_lengths[:j]) for j in range(len(accepted_lengths))]
    return [rows.get((prompt_index, position)) for position in positions]


def _varied_policy(dataset: RadarDataset) -> RadarPolicy:
    """A random policy made to stop at several depths: two hidden units add ``-5 * (s_1 - s_2)`` (the
    gap between the two best beam scores) to the stop margin, and the threshold sits in the widest
    gap between the dataset's middle margins (no decision is on the edge)."""
    torch.manual_seed(0)
    policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens)
    hidden = policy.lstm.hidden_size
    with torch.no_grad():
        first, second = policy.mlp[0], policy.mlp[3]
        first.weight[:2] = 0.0
        first.bias[:2] = 0.0
        first.weight[0, hidden : hidden + 2] = torch.tensor([1.0, -1.0])  # relu(s_1 - s_2)
        first.weight[1, hidden : hidden + 2] = torch.tensor([-1.0, 1.0])  # relu(s_2 - s_1)
        second.weight[:, :2] = torch.tensor([[-5.0, 5.0], [0.0, 0.0]])
        logits, _ = policy(dataset.beam_scores)
        margins = (logits[..., STOP] - logits[..., CONTINUE]).flatten().sort().values
        middle = margins[len(margins) // 3 : 2 * len(margins) // 3]
        gap = int((middle[1:] - middle[:-1]).argmax())
        second.bias[STOP] -= (middle[gap] + middle[gap + 1]) / 2
    return policy


def _skipping_policy(dataset: RadarDataset) -> RadarPolicy:
    """:func:`_varied_policy` with ``SKIP``: a constant skip logit that beats both other actions at
    about a third of the first decisions (and would at later ones too, were skips not masked there)."""
    varied = _varied_policy(dataset)
    policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens, allow_skip=True)
    with torch.no_grad():
        for name, value in varied.state_dict().items():
            policy.state_dict()[name][: len(value)].copy_(value)  # the two RADAR actions; SKIP is row 2
        policy.mlp[3].weight[SKIP] = 0.0
        logits, _ = varied(dataset.beam_scores)
        best_other = logits[:, 0].max(-1).values.sort().values
        low = best_other[len(best_other) // 5 : len(best_other) // 2]
        gap = int((low[1:] - low[:-1]).argmax())
        policy.mlp[3].bias[SKIP] = (low[gap] + low[gap + 1]) / 2
        assert (logits[:, 1:].max(-1).values < policy.mlp[3].bias[SKIP]).any(), "the mask must matter"
    return policy


class LoggingRadarPolicy(RadarPolicy):
    """Logs, per cycle, the beam scores the policy saw and the actions it took (``CONTINUE``/``STOP``/``SKIP``)."""

    def tree_config(self, state):
        self.cycles.append(([], []))
        return super().tree_config(state)

    def continue_drafting(self, step):
        decision = super().continue_drafting(step)
        self.cycles[-1][0].append(beam_scores(step.step_scores, self.tree.top_k))
        self.cycles[-1][1].append(CONTINUE if decision else SKIP if self._cycle.skipping else STOP)
        return decision


def test_latency_charges_the_first_draft_call_from_the_catch_up_table():
    """A profile with a catch-up table prices the first draft call by it (one committed token to read: 0.05 s here),
    each later call at draft_step_seconds, in full cycles and in skips alike."""
    profile = replace(_profile(draft=0.1, policy=0.01), catch_up_tokens=[1, 10], catch_up_seconds=[0.05, 0.5])
    latency = LatencyModel.from_profile(profile, max_tokens=9)
    verify_9 = 1.5 + 1.5 * 5 / 12
    expected = [1.5 + 0.05 + 0.01, verify_9 + 0.05 + 0.1 + 0.02, verify_9 + 0.05 + 0.2 + 0.02]
    assert latency.cycle_seconds(torch.tensor([4, 9, 9])).tolist() == pytest.approx(expected)
    assert latency.skip_seconds(torch.tensor([1])).tolist() == pytest.approx([1.0 + 0.05 + 0.01])


def test_latency_speed_and_return_matrix_by_hand():
    latency = LatencyModel.from_profile(_profile(draft=0.1, policy=0.01), max_tokens=9)
    seconds = latency.cycle_seconds(torch.tensor([4, 9, 9]))
    verify_9 = 1.5 + 1.5 * 5 / 12
    expected = [1.5 + 0.1 + 0.01, verify_9 + 0.2 + 0.02, verify_9 + 0.3 + 0.02]  # n_p = k, but D - 1 at k = D
    assert seconds.tolist() == pytest.approx(expected)
    speed = speed_matrix(seconds)
    assert speed.shape == (3, 4)
    assert speed[1].tolist() == pytest.approx([(a + 1) / expected[1] for a in range(4)])
    assert speed_matrix(seconds, count_bonus_token=False)[2, 3] == pytest.approx(3 / expected[2])

    speed = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=torch.float64)  # [k = 1..3, a = 0..1]
    alpha, beta, gamma = 0.1, 2.0, 0.5
    returns = return_matrix(speed, alpha, beta, gamma)
    assert returns.shape == (3, 2, 2)  # [k, a, decision]
    s = speed.tolist()
    for a in range(2):
        assert returns[0, a].tolist() == pytest.approx([beta * s[0][a], 0.0])  # stop at once
        assert returns[1, a].tolist() == pytest.approx([-alpha + gamma * beta * s[1][a], beta * s[1][a]])
        last = -alpha + beta * s[2][a]  # forced end after D - 1 continues: the continue penalty and the speed
        assert returns[2, a].tolist() == pytest.approx([-alpha + gamma * last, last])
    assert return_matrix(speed[None].repeat(5, 1, 1), alpha, beta, gamma).shape == (5, 3, 2, 2)


def test_dataset_accepted_lengths_are_the_live_ones(setup, tmp_path):
    target, prompts, recording, dataset = setup
    assert dataset.beam_scores.shape == (len(dataset), TREE.depth - 1, TREE.top_k)
    assert torch.equal(dataset.accept_probs.sum(-1), torch.ones(len(dataset), TREE.depth))  # one-hot: greedy
    accepted = dataset.accept_probs.argmax(-1)
    assert accepted.max() > 0
    environment = ReplayEnvironment(recording, _profile())
    for k in (1, 2, TREE.depth):
        policy = hfas.StaticTreePolicy(k, TREE.top_k, TREE.total_tokens)
        for index, ids in enumerate(prompts):
            live = _live(target, ids, policy).speculation
            assert [c.accepted_length for c in environment.replay_prompt(index, policy)] == live.accepted_lengths
            rows = _cycle_rows(dataset, index, live.accepted_lengths)
            cycles = zip(rows, live.accepted_lengths, live.verified_tokens)
            compared = [(row, a, n) for row, a, n in cycles if row is not None]
            assert len(compared) >= 2
            for row, live_accepted, live_verified in compared:
                assert int(accepted[row, k - 1]) == live_accepted
                assert int(dataset.verified_tokens[row, k - 1]) == live_verified
    dataset.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["radar_dataset.json", "radar_dataset.safetensors"]
    loaded = RadarDataset.load(tmp_path)
    assert loaded.tree_config == TREE and torch.equal(loaded.beam_scores, dataset.beam_scores)
    train, held_out = dataset.split_by_prompt(0.25, seed=0)
    assert len(train) + len(held_out) == len(dataset) and len(held_out.prompt_index.unique()) == 1
    assert not set(held_out.prompt_index.tolist()) & set(train.prompt_index.tolist())


def test_live_features_and_decisions_match_the_dataset(setup):
    target, prompts, recording, dataset = setup
    policy = LoggingRadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens)
    policy.load_state_dict(_varied_policy(dataset).state_dict())
    policy.cycles = []
    calls_in_dataset = policy.num_draft_calls(dataset.beam_scores)
    assert len(calls_in_dataset.unique()) >= 3, "the test needs a policy that stops at several depths"
    environment = ReplayEnvironment(recording, _profile())
    compared = 0
    for index, ids in enumerate(prompts):
        stats = _checked_live_cycles(target, ids, policy, environment, index)
        rows = _cycle_rows(dataset, index, stats.accepted_lengths)
        for row, (features, decisions), live_accepted in zip(rows, policy.cycles, stats.accepted_lengths):
            if row is None:
                continue
            # equal up to float32 rounding: the recording's drafter saw the context in other chunks than live generate
            recorded = dataset.beam_scores[row, : len(features)]
            torch.testing.assert_close(torch.stack(features), recorded, rtol=1e-5, atol=1e-5)
            calls = len(decisions) if not decisions[-1] else len(decisions) + 1
            assert calls == int(calls_in_dataset[row])
            assert live_accepted == int(dataset.accept_probs[row, calls - 1].argmax())
            compared += 1
    assert compared >= 20


def test_stops_are_deterministic_and_follow_p_stop(setup):
    target, prompts, _, dataset = setup
    policy = LoggingRadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens)
    policy.load_state_dict(_varied_policy(dataset).state_dict())
    runs = []
    for _ in range(2):
        policy.cycles = []
        policy.train()  # dropout on: drafting must still be deterministic
        _live(target, prompts[1], policy)
        assert not policy.training
        runs.append([decisions for _, decisions in policy.cycles])
    assert runs[0] == runs[1]
    # step by step (the engine's calls) equals the teacher-forced decisions
    scores = (torch.randn(16, TREE.depth - 1, TREE.top_k) - 2.0).sort(-1, descending=True).values
    for row in scores:
        policy.tree_config(None)
        steps = [policy.continue_drafting(hfas.DraftStepInfo(d + 1, 10, row[d], TREE)) for d in range(TREE.depth - 1)]
        stepwise = steps.index(False) + 1 if False in steps else TREE.depth
        assert stepwise == int(policy.num_draft_calls(row[None]))
    for shift, expected in ((1e4, [False]), (-2e4, [True] * (TREE.depth - 1))):  # P(stop) ~ 1, then ~ 0
        with torch.no_grad():
            policy.mlp[3].bias[STOP] += shift
        policy.cycles = []
        _live(target, prompts[0], policy)
        assert all(decisions == expected for _, decisions in policy.cycles[:5])


def test_save_and_auto_load_give_identical_decisions(setup, tmp_path):
    _, _, _, dataset = setup
    policy = _varied_policy(dataset)
    policy.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["artifact_type"] == "hf_adaptive_spec.policy.radar" and config["depth"] == TREE.depth
    loaded = AutoDraftPolicy.from_pretrained(tmp_path)
    assert type(loaded) is RadarPolicy and loaded.tree == policy.tree
    assert torch.equal(loaded(dataset.beam_scores)[0], policy(dataset.beam_scores)[0])
    assert torch.equal(loaded.num_draft_calls(dataset.beam_scores), policy.num_draft_calls(dataset.beam_scores))


def test_skip_is_a_plain_step_taken_only_first_and_live_matches_the_dataset(setup):
    """With allow_skip, the engine's step-by-step actions equal the teacher-forced ones; a skipped
    cycle verifies the root alone and accepts nothing; output stays stock's."""
    target, prompts, recording, dataset = setup
    policy = LoggingRadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens, allow_skip=True)
    policy.load_state_dict(_skipping_policy(dataset).state_dict())
    actions_in_dataset = policy.decisions(dataset.beam_scores)
    assert (actions_in_dataset[:, 1:] != SKIP).all()
    environment = ReplayEnvironment(recording, _profile())
    seen = {STOP: 0, SKIP: 0, CONTINUE: 0}
    for index, ids in enumerate(prompts):
        stats = _checked_live_cycles(target, ids, policy, environment, index)
        for (_, actions), accepted, verified, depth in zip(
            policy.cycles, stats.accepted_lengths, stats.verified_tokens, stats.draft_depths
        ):
            if actions[:1] == [SKIP]:  # the verified tree is the root alone
                assert (accepted, verified, depth) == (0, 1, 0)
        rows = _cycle_rows(dataset, index, stats.accepted_lengths)
        for row, (_, actions) in zip(rows, policy.cycles):
            if row is not None:
                assert actions == actions_in_dataset[row, : len(actions)].tolist()
                seen[actions[-1]] += 1
    assert seen[SKIP] >= 3 and seen[STOP] >= 3, seen


def test_skip_in_the_latency_model_and_held_out_metrics_by_hand(setup):
    _, _, _, dataset = setup
    latency = LatencyModel.from_profile(_profile(draft=0.1, policy=0.01), max_tokens=9)
    skip_seconds = latency.skip_seconds(torch.tensor([1, 4])).tolist()  # the root; the root and a 3-token chain
    assert skip_seconds == pytest.approx([1.0 + 0.1 + 0.01, 1.5 + 0.1 + 0.01])
    policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens, allow_skip=True)
    with torch.no_grad():
        policy.mlp[3].bias[SKIP] = 1e4
    metrics = held_out_metrics(policy, dataset, latency)
    assert metrics["skip_fraction"] == 1.0 and metrics["tokens_per_cycle"] == 1.0
    assert metrics["tokens_per_second"] == pytest.approx(1 / 1.11)
    assert metrics["plain_step_tokens_per_second"] == pytest.approx(1.0)
    with torch.no_grad():
        policy.mlp[3].bias[SKIP] = -1e4
    without = held_out_metrics(policy, dataset, latency)
    assert without["skip_fraction"] == 0.0 and without["tokens_per_second"] <= without["best_static_tokens_per_second"]


def test_a_skip_with_the_lookup_branch_in_the_dataset_matches_live_generate(setup, tmp_path):
    """Built with the prompt-lookup branch, the dataset's outcome of every cycle (a skip verifies the
    root and the chain) is what live generate with prompt_lookup_num_tokens gets; it saves and loads."""
    target, prompts, recording, plain_dataset = setup
    dataset = build_radar_dataset(recording, lookup_tokens=4)
    from_environment = build_radar_dataset(ReplayEnvironment(recording, _profile(), lookup_tokens=4))
    assert torch.equal(from_environment.skip_accepted, dataset.skip_accepted) and from_environment.lookup_tokens == 4
    with pytest.raises(ValueError, match="the environment brings its own branch"):
        build_radar_dataset(ReplayEnvironment(recording, _profile()), lookup_tokens=4)
    dataset.save(tmp_path)
    loaded = RadarDataset.load(tmp_path)
    assert loaded.lookup_kwargs() == {"lookup_tokens": 4, "lookup_ngram_size": 2}
    assert torch.equal(loaded.skip_verified_tokens, dataset.skip_verified_tokens)
    assert torch.equal(dataset.beam_scores, plain_dataset.beam_scores)  # the branch changes outcomes, not drafts
    meta = json.loads((tmp_path / "radar_dataset.json").read_text())
    (tmp_path / "radar_dataset.json").write_text(json.dumps({**meta, "format": "hf_adaptive_spec.radar_dataset.v1"}))
    with pytest.raises(ValueError, match="found hf_adaptive_spec.radar_dataset.v1.*delete the folder"):
        RadarDataset.load(tmp_path)  # made before skips and lookup chains were recorded
    policy = LoggingRadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens, allow_skip=True)
    policy.load_state_dict(_skipping_policy(dataset).state_dict())
    environment = ReplayEnvironment(recording, _profile(), lookup_tokens=4)
    chains = 0
    for index, ids in enumerate(prompts):
        stats = _checked_live_cycles(target, ids, policy, environment, index, prompt_lookup_num_tokens=4)
        rows = _cycle_rows(dataset, index, stats.accepted_lengths)
        for row, (_, actions), accepted, verified in zip(rows, policy.cycles, stats.accepted_lengths,
                                                         stats.verified_tokens):
            if row is None:
                continue
            if actions[:1] == [SKIP]:
                assert (accepted, verified) == (dataset.skip_accepted[row], dataset.skip_verified_tokens[row])
                chains += verified > 1
            else:
                k = len(actions) if actions[-1] == STOP else TREE.depth
                assert accepted == int(dataset.accept_probs[row, k - 1].argmax())
                assert verified == dataset.verified_tokens[row, k - 1]
    assert chains >= 3  # skipped cycles that verified a lookup chain


class LookupWatchingRadarPolicy(LoggingRadarPolicy):
    """Also logs each cycle's prompt-lookup length."""

    def tree_config(self, state):
        self.lookup_lengths.append(state.lookup_length)
        return super().tree_config(state)


def test_lookup_first_verifies_a_matched_chain_alone_and_its_dataset_holds_the_other_positions(setup, tmp_path):
    """A lookup-first dataset is the every-position dataset without the positions where the branch matched; live, a
    lookup-first policy drafts nothing and decides nothing there, and its other cycles are the dataset's rows."""
    target, prompts, recording, _ = setup
    every = build_radar_dataset(recording, lookup_tokens=4)
    dataset = build_radar_dataset(recording, lookup_tokens=4, lookup_first=True)
    environment = ReplayEnvironment(recording, _profile(), lookup_tokens=4)
    positions = list(zip(every.prompt_index.tolist(), every.position.tolist()))
    kept = [i for i, (p, s) in enumerate(positions) if not environment.lookup_chain(p, s)]
    assert 0 < len(kept) < len(every) and dataset.lookup_first
    for name in ("prompt_index", "position", "beam_scores", "accept_probs", "verified_tokens", "skip_accepted"):
        assert torch.equal(getattr(dataset, name), getattr(every, name)[kept]), name
    dataset.save(tmp_path)
    loaded = RadarDataset.load(tmp_path)
    assert loaded.lookup_first and loaded.select(torch.arange(3)).lookup_first and loaded.lookup_tokens == 4
    policy = LookupWatchingRadarPolicy(
        depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens, lookup_first=True
    )
    policy.load_state_dict(_varied_policy(every).state_dict())
    matched_cycles = compared = 0
    for index, ids in enumerate(prompts):
        policy.lookup_lengths = []
        stats = _checked_live_cycles(target, ids, policy, environment, index, prompt_lookup_num_tokens=4)
        rows = _cycle_rows(dataset, index, stats.accepted_lengths)
        cycles = zip(rows, policy.lookup_lengths, policy.cycles, stats.draft_depths, stats.verified_tokens,
                     stats.accepted_lengths)
        for row, matched, (features, decisions), depth, verified, accepted in cycles:
            if matched:
                assert (depth, verified, features, row) == (0, 1 + matched, [], None)
                matched_cycles += 1
            elif row is not None:
                calls = len(decisions) if not decisions[-1] else len(decisions) + 1
                assert accepted == int(dataset.accept_probs[row, calls - 1].argmax())
                compared += 1
    assert matched_cycles >= 3 and compared >= 10


def test_lookup_first_needs_the_branch_and_a_policy_trained_as_it_is_used(setup, tmp_path):
    _, _, recording, _ = setup
    with pytest.raises(ValueError, match="needs the branch: pass lookup_tokens=N"):
        build_radar_dataset(recording, lookup_first=True)
    dataset = build_radar_dataset(recording, lookup_tokens=4, lookup_first=True)
    policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens)
    config = RadarConfig(output_dir=str(tmp_path), report_to=[], eval_strategy="no", load_best_model_at_end=False)
    with pytest.raises(ValueError, match="built with lookup_first=True but the policy has lookup_first=False"):
        RadarTrainer(policy, config, dataset, _profile())
    policy.lookup_first = True  # saved as the policy holds it now
    policy.save_pretrained(tmp_path / "policy")
    assert RadarPolicy.from_pretrained(tmp_path / "policy").lookup_first


def test_a_lookup_chain_longer_than_the_tree_widens_the_accepted_lengths(tmp_path):
    # the generation continues the prompt's pattern 1 2 3 4 5; the drafter always proposes 9, 9
    prompt_ids, generated = [1, 2, 3, 4, 5, 1, 2], [3, 4, 5, 1, 2, 3, 4]
    sequence = prompt_ids + generated
    trees = [
        ReplayTree(context_length=len(prompt_ids) + t + 1, tokens=[sequence[len(prompt_ids) + t], 9, 9],
                   parents=[-1, 0, 1], depths=[0, 1, 2], scores=[0.0, -0.1, -0.2],
                   target_next=[sequence[len(prompt_ids) + t + 1], -1, -1])
        for t in range(len(generated) - 1)
    ]
    tree = TreeConfig(depth=2, top_k=1, total_tokens=3)
    recording = ReplayRecording(tree, 10, len(generated), [trees], prompt_ids=[prompt_ids])
    dataset = build_radar_dataset(recording, lookup_tokens=3)
    assert dataset.max_accepted == 3 and dataset.accept_probs.shape[1:] == (2, 4)
    # "2 3" looks up "4 5 1", all accepted, whatever the (wrong) drafts: 3 tokens, more than the depth
    assert dataset.accept_probs[0].argmax(-1).tolist() == [3, 3] and dataset.verified_tokens[0].tolist() == [5, 6]
    assert (dataset.skip_accepted[0], dataset.skip_verified_tokens[0]) == (3, 4)
    profile = _profile()
    latency = LatencyModel.from_profile(profile, max_tokens=3 + 3)
    assert held_out_metrics(RadarPolicy(depth=2, top_k=1, total_tokens=3), dataset, latency)["tokens_per_cycle"] > 3
    args = RadarConfig(output_dir=str(tmp_path), max_steps=2, eval_strategy="no", save_strategy="no",
                       load_best_model_at_end=False, report_to=[], disable_tqdm=True)
    trainer = RadarTrainer(model=RadarPolicy(depth=2, top_k=1, total_tokens=3), args=args, train_dataset=dataset,
                           profile=profile)
    assert trainer.train().global_step == 2


def test_the_trainers_card_says_what_the_policy_does_and_what_it_was_trained_for(tmp_path):
    """RadarTrainer rendered the policy template directly: its card lacked the line saying what the policy does (LTD's
    and Re-SpS's trainers write theirs through the policy's generate_model_card), and the cost curve it records."""
    args = RadarConfig(output_dir=str(tmp_path), max_steps=1, eval_strategy="no", save_strategy="no",
                       load_best_model_at_end=False, report_to=[], disable_tqdm=True)
    policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens)
    policy.mark_trained_on(_profile().cost_curve())  # as the RADAR script marks it
    trainer = RadarTrainer(model=policy, args=args, train_dataset=_constructed_dataset(), profile=_profile())
    card = str(trainer.model_card())
    assert "**What it does:**" in card and "continue" in card.split("**What it does:**")[1].split("\n")[0]
    assert "# RADAR draft policy" in card and "RADAR: an LSTM over each draft step's" in card
    assert f"**Cost curve:** `{policy.trained_on}`" in card


def test_training_rewards_a_skip_with_its_accepted_lookup_chain(tmp_path):
    """Where a lookup chain is found it commits as many tokens as the full-depth tree, for a smaller
    verification and one draft call: the best policy skips every cycle. Without the chain it drafts
    the confident ones (and skips the others, as in the test above)."""
    dataset = _constructed_dataset()
    accepted_full = dataset.accept_probs[:, -1].argmax(-1)
    with_chain = RadarDataset(
        TREE, dataset.beam_scores, dataset.accept_probs, dataset.verified_tokens, dataset.prompt_index,
        dataset.position, skip_accepted=accepted_full, skip_verified_tokens=torch.where(accepted_full > 0, 5, 1),
        lookup_tokens=4,
    )
    profile = _profile(draft=0.02, policy=0.001)
    for data, all_skip in ((with_chain, True), (dataset, False)):
        train, held_out = data.split_by_prompt(0.25, seed=0)
        args = RadarConfig(
            output_dir=str(tmp_path), max_steps=300, learning_rate=3e-3, alpha=0.02, beta=0.21, allow_skip=True,
            reward_baseline=True, entropy_coef=0.1, eval_strategy="no", save_strategy="no",
            load_best_model_at_end=False, report_to=[], seed=0, disable_tqdm=True,
        )
        torch.manual_seed(0)
        policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens, allow_skip=True)
        trainer = RadarTrainer(model=policy, args=args, train_dataset=train, profile=profile)
        trainer.train()
        skip_fraction = held_out_metrics(policy, held_out, trainer.latency)["skip_fraction"]
        assert (skip_fraction > 0.95) == all_skip, skip_fraction


def test_skip_policy_saves_and_loads(setup, tmp_path):
    _, _, _, dataset = setup
    policy = _skipping_policy(dataset)
    policy.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["allow_skip"] is True
    loaded = AutoDraftPolicy.from_pretrained(tmp_path)
    assert loaded.allow_skip
    assert torch.equal(loaded.decisions(dataset.beam_scores), policy.decisions(dataset.beam_scores))


def test_skip_needs_the_bonus_token_and_a_matching_policy(setup, tmp_path):
    _, _, _, dataset = setup
    with pytest.raises(ValueError, match="allow_skip needs count_bonus_token=True"):
        RadarConfig(output_dir=str(tmp_path), allow_skip=True, count_bonus_token=False, report_to=[])
    args = RadarConfig(output_dir=str(tmp_path), allow_skip=True, report_to=[])
    policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens)
    with pytest.raises(ValueError, match="build the policy with the config's allow_skip"):
        RadarTrainer(model=policy, args=args, train_dataset=dataset, profile=_profile())


def _constructed_dataset(num_prompts: int = 16, per_prompt: int = 32, seed: int = 0) -> RadarDataset:
    """Confident drafts (scores near 0) are always accepted, unsure ones (near -6) never: the best
    policy drafts the full depth on the first and stops at once on the second."""
    generator = torch.Generator().manual_seed(seed)
    n, depth = num_prompts * per_prompt, TREE.depth
    good = torch.rand(n, generator=generator) < 0.5
    level = torch.where(good, -0.3, -6.0)[:, None, None] * torch.arange(1, depth)[None, :, None]
    scores = level - torch.rand(n, depth - 1, TREE.top_k, generator=generator).sort(-1, descending=True).values
    accepted = torch.where(good[:, None], torch.arange(1, depth + 1)[None, :], 0)
    return RadarDataset(
        TREE, scores, torch.nn.functional.one_hot(accepted, depth + 1).float(),
        torch.tensor([4, 9, 9, 9]).repeat(n, 1), torch.arange(n) // per_prompt, torch.arange(n) % per_prompt,
    )


def test_a_dataset_save_cut_by_a_crash_leaves_no_dataset_to_load(tmp_path, crash_mid_write):
    """radar_dataset.json marks a whole dataset (the script loads a folder that holds it, else builds one): a crash
    while it was written left half a JSON file, which every later run failed on (a bare JSONDecodeError); over an
    older dataset, that one's JSON beside the new tensors."""
    for folder in (tmp_path / "new", tmp_path / "over an older one"):
        if folder.name != "new":
            _constructed_dataset(num_prompts=2, per_prompt=4).save(folder, built_from="older recording")
        with crash_mid_write():
            _constructed_dataset(num_prompts=2, per_prompt=4, seed=1).save(folder, built_from="recording")
        assert not (folder / "radar_dataset.json").exists()  # no dataset there: the script builds it again
        assert not [p.name for p in folder.iterdir() if p.name.endswith(".partial")]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_training_learns_to_skip_unlikely_drafts_and_fails_with_the_reward_flipped(sign, tmp_path):
    """Unsure drafts are never accepted and verifying them costs 1.5x a plain step: the best policy
    skips them (a plain step) and drafts the full depth on confident ones."""
    train, held_out = _constructed_dataset().split_by_prompt(0.25, seed=0)
    profile = _profile(draft=0.02, policy=0.001)
    beta = 10 * (0.02 + 0.001)
    args = RadarConfig(
        output_dir=str(tmp_path), max_steps=300, learning_rate=3e-3, alpha=0.02, beta=beta,
        allow_skip=True, reward_baseline=True, entropy_coef=0.1, eval_strategy="no", save_strategy="no",
        load_best_model_at_end=False, logging_steps=100, report_to=[], seed=0, disable_tqdm=True,
    )
    if sign < 0:  # the control: RadarConfig refuses a flipped reward, so flip it after its checks
        args.alpha, args.beta = -args.alpha, -args.beta
    torch.manual_seed(0)
    policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens, allow_skip=True)
    trainer = RadarTrainer(model=policy, args=args, train_dataset=train, profile=profile)
    trainer.train()
    actions = policy.decisions(held_out.beam_scores)
    good = held_out.accept_probs[:, 0].argmax(-1) > 0
    learned = bool(((actions[:, 0] == SKIP) == ~good).float().mean() > 0.95)
    assert learned == (sign > 0)
    metrics = held_out_metrics(policy, held_out, trainer.latency)
    assert (metrics["tokens_per_second"] > metrics["best_static_tokens_per_second"]) == (sign > 0)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_training_learns_when_to_stop_and_fails_with_the_reward_flipped(sign, tmp_path):
    train, held_out = _constructed_dataset().split_by_prompt(0.25, seed=0)
    profile = _profile(draft=0.02, policy=0.001)
    beta = 10 * (0.02 + 0.001)
    args = RadarConfig(
        output_dir=str(tmp_path), max_steps=200, learning_rate=3e-3, alpha=0.02, beta=beta,
        eval_strategy="no", save_strategy="no", load_best_model_at_end=False, logging_steps=50, report_to=[],
        seed=0, disable_tqdm=True,
    )
    if sign < 0:  # the control: RadarConfig refuses a flipped reward, so flip it after its checks
        args.alpha, args.beta = -args.alpha, -args.beta
    torch.manual_seed(0)
    policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens)
    trainer = RadarTrainer(model=policy, args=args, train_dataset=train, profile=profile)
    trainer.train()
    calls = policy.num_draft_calls(held_out.beam_scores)
    best = torch.where(held_out.accept_probs[:, 0].argmax(-1) > 0, TREE.depth, 1)
    learned = bool((calls == best).float().mean() > 0.95)
    assert learned == (sign > 0)
    metrics = held_out_metrics(policy, held_out, trainer.latency)
    assert (metrics["tokens_per_second"] > metrics["best_static_tokens_per_second"]) == (sign > 0)


@pytest.fixture
def script_paths(setup, tmp_path) -> dict[str, str | float]:
    """The script's data arguments: the setup's recording and a profile saved to files, a dataset folder to build."""
    setup[2].save(tmp_path / "recording")
    _profile().save(tmp_path / "profile.json")
    return dict(
        profile_path=str(tmp_path / "profile.json"), dataset_path=str(tmp_path / "dataset"),
        recording_path=str(tmp_path / "recording"), eval_fraction=0.25,
    )


def test_script_is_seeded_keeps_the_best_checkpoint_and_resumes(script_paths, tmp_path):
    script_args = RadarScriptArguments(**script_paths, base_model="tiny-llama")

    def config(**overrides):
        return RadarConfig(**{
            "output_dir": str(tmp_path / "out"), "max_steps": 6, "per_device_train_batch_size": 8,
            "learning_rate": 0.01, "eval_strategy": "steps", "eval_steps": 2, "save_strategy": "steps",
            "save_steps": 2, "logging_steps": 2, "report_to": [], "seed": 0, "disable_tqdm": True, **overrides,
        })

    trainer = main(script_args, config())
    assert (tmp_path / "dataset" / "radar_dataset.json").is_file()
    files = sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_file())
    assert files == ["README.md", "config.json", "model.safetensors", "training_config.json"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "library_name: hf-adaptive-spec" in card and "radar" in card and "6 steps" in card and "tiny-llama" in card
    evals = [e["eval_tokens_per_second"] for e in trainer.state.log_history if "eval_tokens_per_second" in e]
    assert len(evals) == 3 and trainer.state.best_metric == max(evals)
    best = RadarPolicy.from_pretrained(trainer.state.best_model_checkpoint)
    final = AutoDraftPolicy.from_pretrained(tmp_path / "out")
    for key, value in best.state_dict().items():
        assert torch.equal(final.state_dict()[key], value)
    again = main(script_args, config(output_dir=str(tmp_path / "again")))  # seeded: the same run twice
    assert all(torch.equal(again.model.state_dict()[key], value) for key, value in final.state_dict().items())
    resumed = main(script_args, config(max_steps=8, resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-6")))
    assert resumed.state.global_step == 8
    assert [e["step"] for e in resumed.state.log_history if "eval_tokens_per_second" in e] == [2, 4, 6, 8]
    # settings that define the run: refused on resume, each named (a new learning rate would not even apply)
    for changed, message in (({"learning_rate": 0.1}, "learning_rate: 0.01 -> 0.1"), ({"gamma": 0.5}, "gamma: ")):
        with pytest.raises(ValueError, match=f"was trained with other settings \\({message}"):
            main(script_args, config(max_steps=10, resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-8"),
                                     **changed))


def test_script_builds_a_dataset_with_the_lookup_branch_and_refuses_other_settings(script_paths, tmp_path):
    config = RadarConfig(
        output_dir=str(tmp_path / "out"), max_steps=2, allow_skip=True, eval_strategy="no", save_strategy="no",
        load_best_model_at_end=False, report_to=[], disable_tqdm=True,
    )
    trainer = main(RadarScriptArguments(**script_paths, lookup_tokens=4), config)
    assert RadarDataset.load(tmp_path / "dataset").lookup_tokens == 4
    assert trainer.latency.verify_seconds.numel() == TREE.total_tokens + 4 + 1  # room for a grafted chain
    assert "assistant_policy=policy, prompt_lookup_num_tokens=4)" in (tmp_path / "out" / "README.md").read_text()
    with pytest.raises(ValueError, match=r"other settings than asked: the prompt-lookup branch .*lookup_tokens': 0"):
        main(RadarScriptArguments(**script_paths), config)
    main(RadarScriptArguments(**script_paths, lookup_tokens=4, depth=TREE.depth), config)  # the dataset's own settings
    with pytest.raises(ValueError, match=r"lookup_first True \(the dataset's: False\)"):
        main(RadarScriptArguments(**script_paths, lookup_tokens=4, lookup_first=True), config)
    first = {**script_paths, "dataset_path": str(tmp_path / "lookup-first"), "lookup_tokens": 4, "lookup_first": True}
    main(RadarScriptArguments(**first), config)
    assert RadarDataset.load(tmp_path / "lookup-first").lookup_first
    assert RadarPolicy.from_pretrained(tmp_path / "out").lookup_first
    assert "`lookup_first`" in (tmp_path / "out" / "README.md").read_text()
    other = {"depth": 2, "total_tokens": 4, "recording_path": str(tmp_path / "another-recording")}
    for name, value in other.items():  # each would build another dataset: refused, never silently ignored
        with pytest.raises(ValueError, match=rf"{name} {value} \(the dataset's: "):
            main(RadarScriptArguments(**{**script_paths, name: value}, lookup_tokens=4), config)


def test_the_policy_call_is_the_profiles_unless_set_and_the_card_says_which(script_paths, tmp_path):
    """Recipes held one machine's policy-call time (0.300 ms) over the user's measured one, and the card stated it as
    if measured: unset, the latency model takes the profile's; set, the given one; the card says where it came from."""
    def trained(**overrides):
        config = RadarConfig(output_dir=str(tmp_path / "out"), max_steps=1, eval_strategy="no", save_strategy="no",
                             load_best_model_at_end=False, report_to=[], disable_tqdm=True, **overrides)
        trainer = main(RadarScriptArguments(**script_paths), config)
        return trainer.latency.policy_step_seconds, (tmp_path / "out" / "README.md").read_text()

    seconds, card = trained()
    assert seconds == 0.01 and "policy call 10.000 ms, the profile's measured policy_call_seconds)" in card
    seconds, card = trained(policy_step_seconds=3.0e-4)
    assert seconds == 3.0e-4 and "policy call 0.300 ms, set by policy_step_seconds, not the profile's)" in card


def test_two_cpu_ranks_train_with_torchrun(setup, tmp_path):
    """torchrun --nproc_per_node 2 (gloo) runs the training script as one two-process world."""
    _, _, _, dataset = setup
    dataset.save(tmp_path / "dataset")
    _profile().save(tmp_path / "profile.json")
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(REPO / "trainers" / "radar.py"),
        "--dataset_path", str(tmp_path / "dataset"), "--profile_path", str(tmp_path / "profile.json"),
        "--eval_fraction", "0.25", "--output_dir", str(out), "--num_train_epochs", "2",
        "--per_device_train_batch_size", "8", "--save_total_limit", "1", "--seed", "0",
        "--report_to", "none", "--ddp_backend", "gloo", "--disable_tqdm", "true",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-6000:]
    train_cycles = len(dataset.split_by_prompt(0.25, seed=0)[0])
    state = json.loads(next(out.glob("checkpoint-*")).joinpath("trainer_state.json").read_text())
    assert state["max_steps"] == 2 * -(-train_cycles // (2 * 8))  # two epochs, each shared by the two ranks
    assert isinstance(AutoDraftPolicy.from_pretrained(out), RadarPolicy)


@pytest.mark.parametrize("min_score", [0.0, 0.5, float("nan"), -float("inf")])
def test_a_floor_that_would_flatten_or_poison_the_scores_is_refused(min_score):
    """Log-probs are <= 0: a floor at or above 0 made every input the floor (the same decision whatever the drafts),
    NaN or -inf made NaN logits, which read as continue at every step."""
    with pytest.raises(ValueError, match="min_score must be a number > -inf and < 0, not NaN \\(a floor on log-prob"):
        RadarPolicy(depth=4, top_k=2, total_tokens=8, lstm_hidden=8, mlp_hidden=8, min_score=min_score)


@pytest.mark.parametrize("allow_skip", [False, True])
def test_the_engines_one_step_cell_is_the_networks_forward(allow_skip):
    """continue_drafting runs the LSTM cell written out (numpy, on the host); its logits must be forward's,
    step by step, and follow the weights from the next generation on when an optimiser's step or a ``.data`` assignment
    changes them."""
    torch.manual_seed(5)
    policy = RadarPolicy(depth=6, top_k=4, total_tokens=9, lstm_hidden=16, mlp_hidden=8, allow_skip=allow_skip)
    for parameter in policy.parameters():  # away from zero, so that every gate matters
        torch.nn.init.normal_(parameter, std=0.5)
    scores = -torch.rand(3, 5, 4).sort(-1).values * 6
    expected, _ = policy(scores)
    policy.begin_generation()
    for row, want in zip(scores, expected):
        policy.tree_config(None)
        got = torch.as_tensor(np.stack([policy._next_logits(step, first_decision=d) for d, step in enumerate(row)]))
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    bias = policy.mlp[3].bias
    bias.grad = -torch.ones_like(bias)
    torch.optim.SGD([bias], lr=1.0, foreach=True).step()  # a trainer's step: no version bump is promised
    policy.begin_generation()
    policy.tree_config(None)
    shifted = policy._next_logits(scores[0, 0], first_decision=0)
    torch.testing.assert_close(torch.as_tensor(shifted), expected[0, 0] + 1.0, atol=1e-5, rtol=1e-5)
    bias.data = bias.detach() + 1.0  # a .data assignment bumps no version either
    policy.begin_generation()
    policy.tree_config(None)
    shifted = policy._next_logits(scores[0, 0], first_decision=0)
    torch.testing.assert_close(torch.as_tensor(shifted), expected[0, 0] + 2.0, atol=1e-5, rtol=1e-5)


def test_beam_scores_are_the_best_step_scores_best_first_padded_with_minus_infinity():
    """The host sort equals torch's top-k on every size around top_k, with ties, -inf entries and bfloat16 input."""
    generator = torch.Generator().manual_seed(3)
    for n in range(1, 12):
        scores = -torch.rand(n, generator=generator) * 5
        scores[n // 2] = scores[0]  # a tie
        if n > 3:
            scores[1] = float("-inf")
        for top_k in (1, 4, 8):
            for tensor in (scores, scores.bfloat16()):
                expected = tensor.float().topk(min(top_k, n)).values
                expected = torch.cat([expected, torch.full((top_k - expected.numel(),), float("-inf"))])
                got = beam_scores(tensor, top_k)
                assert got.dtype == torch.float32 and got.shape == (top_k,)
                torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_the_dataset_counts_no_accepted_token_past_the_end_of_sequence():
    """Near an end-of-sequence token, deeper drafts accept past it in verification but add nothing to the answer."""
    import copy

    target, ids = tiny_model("llama"), prompt(7, seed=11)
    generated = target.generate(ids, max_new_tokens=30, do_sample=False)[0, ids.shape[1]:].tolist()
    end = next(i for i in range(6, len(generated)) if generated[i] not in generated[:i])
    perfect = hfas.CausalLMDrafter(copy.deepcopy(target))  # accepts every drafted token
    recording = record_replay(target, perfect, [ids], TreeConfig(4, 2, 8), 30, eos_token_ids=(generated[end],))
    dataset = build_radar_dataset(recording)
    accepted = dataset.accept_probs.argmax(-1)  # [N, D]
    remaining = len(recording.prompts[0]) - dataset.position  # tokens left in the answer at each row
    assert (accepted <= (remaining - 1)[:, None]).all()
    assert (accepted[-1] < accepted[0]).any()  # the last rows are cut by the end, the first are not


def test_a_depth_the_tree_cannot_reach_is_refused_naming_the_fix(setup):
    """The engine drafts no deeper than total_tokens - 1; asking RADAR for more used to fail later as
    'record longer'."""
    recording = setup[2]
    with pytest.raises(ValueError,
                       match=r"depth=3 cannot be drafted with total_tokens=3.*Lower depth or raise total_tokens"):
        build_radar_dataset(recording, depth=3, total_tokens=3)
    assert build_radar_dataset(recording, depth=2, total_tokens=3).tree_config.depth == 2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_policy_decides_on_a_dataset_s_float32_scores_as_the_engine_does(dtype):
    """``decisions`` (the trainer's held-out metrics, offline evaluation) and ``forward`` (training) on a bfloat16
    policy with a dataset's float32 beam scores raised "RNN input dtype (torch.float32) does not match weight dtype".
    ``decisions`` are the engine's: its host cell computes in float32 on the weights' float32 copies (computed in the
    policy's dtype, one of these 2,000 rows decides otherwise)."""
    torch.manual_seed(1)
    policy = RadarPolicy(depth=5, top_k=3, total_tokens=8, lstm_hidden=16, mlp_hidden=8, allow_skip=True)
    for parameter in policy.parameters():  # away from zero, so that every gate matters
        torch.nn.init.normal_(parameter, std=0.5)
    policy = policy.to(dtype)
    scores = -torch.rand(2000, 4, 3).sort(-1).values * 8
    actions = policy.decisions(scores)
    policy.begin_generation()
    for row, taken in zip(scores, actions):
        policy.tree_config(None)
        live = [int(policy.decide(torch.from_numpy(policy._next_logits(step, d)))) for d, step in enumerate(row)]
        assert live == taken.tolist()
    assert len(set(actions.flatten().tolist())) > 1  # the rows decide differently: the comparison means something
    logits, hidden = policy(scores[:, :2])
    later, _ = policy(scores[:, 2:], tuple(h.float() for h in hidden), first_decision=2)
    assert logits.dtype == later.dtype == dtype
