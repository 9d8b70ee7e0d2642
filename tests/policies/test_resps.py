"""Re-SpS: the grid, the state (same live and in replay), action persistence, losslessness,
save/load, and PPO training on replayed generations."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.environments import MultiReplayEnvironment, record_replay
from hf_adaptive_spec.policies import CycleState
from hf_adaptive_spec.policies.resps import ACTION_GRIDS, ReSpSPolicy, action_grid
from hf_adaptive_spec.policies.serialization import AutoDraftPolicy
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training.resps import ReSpSConfig, ReSpSTrainer

torch.set_num_threads(1)

GRID = action_grid((4, 6, 8), (3, 4), (2, 3))  # 10 actions, top_k 2 and 3
MAX_NEW = 32
REPO_ROOT = Path(__file__).resolve().parents[2]


def _profile() -> HardwareProfile:
    return HardwareProfile(
        device="cpu", dtype="float32", num_threads=1, context_length=64,
        verify_tokens=[1, 4, 8, 16], verify_seconds=[1.0, 1.3, 2.0, 3.4], draft_step_seconds=0.15,
    )


def _eagle3(target) -> hfas.Eagle3Drafter:
    torch.manual_seed(1)
    return hfas.Eagle3Drafter(Eagle3DraftModel.from_target(target, initializer_range=0.3))


def _policy(target, **kwargs) -> ReSpSPolicy:
    torch.manual_seed(0)
    return ReSpSPolicy.for_target(target.config, actions=GRID, **kwargs)


@pytest.fixture(scope="module")
def setup():
    """A tiny target, its prompts, and one recording per top_k of GRID (EAGLE-3 drafter)."""
    target = tiny_model("llama")
    prompts = [prompt(8 + i, seed=20 + i) for i in range(4)]
    policy = _policy(target)
    recordings = [
        record_replay(target, _eagle3(target), prompts, config, MAX_NEW, feature_layers=policy.feature_layers)
        for config in policy.required_recordings().values()
    ]
    return target, prompts, recordings


def _environment(recordings, **lookup) -> MultiReplayEnvironment:
    return MultiReplayEnvironment(recordings, _profile(), **lookup)


@pytest.mark.parametrize("setting, value",
                         [("max_new_tokens", MAX_NEW + 4), ("eos_token_ids", (5,)), ("vocab_size", 7)])
def test_recordings_of_other_generation_settings_are_refused(setup, setting, value):
    _, _, recordings = setup
    other = dataclasses.replace(recordings[1], **{setting: value})
    with pytest.raises(ValueError, match="different settings .*max_new_tokens.*--max-new-tokens"):
        _environment([recordings[0], other, *recordings[2:]])


def test_the_same_end_tokens_in_another_order_are_the_same_setting(setup):
    _, _, recordings = setup
    ordered = [dataclasses.replace(r, eos_token_ids=(3, 2) if i % 2 else (2, 3)) for i, r in enumerate(recordings)]
    assert _environment(ordered).lengths == _environment(recordings).lengths


def test_recordings_with_more_prompts_replay_the_common_ones(setup):
    _, _, recordings = setup
    shorter = dataclasses.replace(recordings[0], prompts=recordings[0].prompts[:3])
    environment = _environment([shorter, *recordings[1:]])
    assert environment.num_prompts == 3
    assert environment.lengths == _environment(recordings).lengths[:3]


def test_recordings_of_other_prompts_are_refused_and_a_prompt_that_differs_is_not_replayed(setup):
    _, _, recordings = setup
    others = dataclasses.replace(recordings[1], prompt_ids=[[*ids, 7] for ids in recordings[1].prompt_ids])
    with pytest.raises(ValueError, match="share no generation.*same --prompts, --start and --seed"):
        _environment([recordings[0], others, *recordings[2:]])
    first_differs = dataclasses.replace(recordings[1], prompt_ids=[[7, *recordings[1].prompt_ids[0][1:]],
                                                                   *recordings[1].prompt_ids[1:]])
    environment = _environment([recordings[0], first_differs, *recordings[2:]])
    assert environment.lengths[0] == 0 < min(environment.lengths[1:])  # its trees agree, its prompt does not
    assert environment.lengths[1:] == _environment(recordings).lengths[1:]


def test_a_cycle_replayed_on_another_top_k_than_its_state_s_finds_its_lookup_chain_once(setup, monkeypatch):
    import hf_adaptive_spec.environments.replay as replay

    _, _, recordings = setup
    environment = _environment(recordings, lookup_tokens=4)
    other_top_k = max(environment.environments)
    assert other_top_k != environment.reference.tree_config.top_k  # states come from the reference recording
    searches, search = [], replay.lookup_continuation
    monkeypatch.setattr(replay, "lookup_continuation", lambda *args: searches.append(args) or search(*args))
    policy = hfas.StaticTreePolicy(depth=2, top_k=other_top_k, total_tokens=4)
    cycles = [cycle for p in range(environment.num_prompts) for cycle in environment.replay_prompt(p, policy)]
    assert 0 < len(searches) <= len(cycles)  # the state's search serves the replay on the other recording


def test_action_grid_filter_on_a_hand_checked_case():
    # kept: total_tokens <= top_k ** (depth - 1) and <= 1 + top_k + (depth - 1) * top_k ** 2 (the full tree)
    assert action_grid((4, 8, 16, 24), (2, 3, 6), (2, 4)) == (
        (4, 2, 4), (4, 3, 2), (4, 3, 4), (4, 6, 2), (4, 6, 4),
        (8, 3, 4), (8, 6, 2), (8, 6, 4),
        (16, 3, 4), (16, 6, 2), (16, 6, 4),
        (24, 6, 4),  # (24, 6, 2) passes the paper's filter (24 <= 32) but the full tree has 23 nodes
    )
    assert action_grid((2, 3), (1, 2), (2,), paper_filter=False) == ((2, 1, 2), (2, 2, 2), (3, 1, 2), (3, 2, 2))
    assert action_grid((2, 3), (1, 2), (2,)) == ((2, 2, 2),)  # 3 > 2 ** 1, and depth 1 allows 1 token only
    # depth 0 is a plain decoding step: the root alone
    assert action_grid((1, 6), (0, 1), (4,), paper_filter=False) == ((1, 0, 4), (1, 1, 4))
    paper = ACTION_GRIDS["paper"]
    assert len(paper) == 177 and {(80, 3, 8), (96, 3, 8), (128, 3, 8)}.isdisjoint(paper)


@pytest.mark.parametrize("setting, value", [
    ("observation_clip", 0.0), ("observation_clip", -10.0), ("observation_clip", float("nan")),
    ("temperature", -1.0), ("temperature", float("nan")), ("decision_interval", 2.5), ("training_interval", True),
])
def test_settings_that_would_run_as_something_else_are_refused(setting, value):
    """A clip of 0 or below made every observation one constant (one action whatever the state), a negative or NaN
    temperature ran as argmax, a fractional interval held an action a rounded-up number of cycles."""
    with pytest.raises(ValueError, match=f"ReSpSPolicy: {setting}"):
        ReSpSPolicy(hidden_size=8, num_target_layers=4, actions=GRID, **{setting: value})
    ReSpSPolicy(hidden_size=8, num_target_layers=4, actions=GRID, observation_clip=float("inf"), temperature=1.5)


def test_a_tiny_temperature_samples_the_argmax_action_instead_of_nan(setup):
    """softmax(logits / 1e-45) in float32 divided by a denormal (or by 0, for 1e-300): infinities, NaN
    probabilities, and a bare RuntimeError from torch.multinomial inside generate."""
    target, _, _ = setup
    generator = torch.Generator().manual_seed(3)
    states = [CycleState(context_length=10, features={layer: 5 * torch.randn(target.config.hidden_size,
                                                                            generator=generator)
                                                      for layer in _policy(target).feature_layers}) for _ in range(4)]

    def decisions(policy: ReSpSPolicy) -> list:
        trees = []
        for state in states:
            policy.end_episode()  # every state a new decision
            trees.append(policy.tree_config(state))
        return trees

    expected = decisions(_policy(target))  # temperature 0: the argmax action
    assert len(set(expected)) > 1
    for temperature in (1e-45, 1e-300, 5e-324):
        assert decisions(_policy(target, temperature=temperature)) == expected  # the same weights


def test_policy_defaults_follow_eagle3_and_the_paper():
    policy = ReSpSPolicy(hidden_size=8, num_target_layers=30)
    assert policy.feature_layers == (2, 15, 27)
    assert policy.feature_mean.shape == (24,)  # concatenated, not averaged
    assert [m.out_features for m in policy.actor if isinstance(m, torch.nn.Linear)] == [128, 128, 53]
    assert not policy.training and policy.decision_interval == 30 and policy.training_interval == 10
    assert policy.required_recordings()[2] == hfas.TreeConfig(depth=6, top_k=2, total_tokens=16)


def test_live_state_equals_replayed_state(setup):
    target, prompts, recordings = setup
    environment = _environment(recordings)
    policy = _policy(target, decision_interval=1)
    policy.fit_normalizer(environment.states(range(len(prompts))))
    seen: list[tuple[int, torch.Tensor]] = []
    observation = policy.observation

    def spy(state):
        seen.append((state.context_length, observation(state)))
        return seen[-1][1]

    policy.observation = spy
    top_ks = set()
    tree_config = policy.tree_config

    def recording_top_k(state):
        config = tree_config(state)
        top_ks.add(config.top_k)
        return config

    policy.tree_config = recording_top_k
    for index, ids in enumerate(prompts):
        seen.clear()
        live = target.generate(
            ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True,
            assistant_model=_eagle3(target), assistant_policy=policy,
        ).speculation
        live_states = list(seen)
        seen.clear()
        replayed = environment.replay_prompt(index, policy)
        assert [c.accepted_length for c in replayed] == live.accepted_lengths
        assert [c.verified_tokens for c in replayed] == live.verified_tokens
        assert [length for length, _ in seen] == [length for length, _ in live_states]
        for (_, replayed_state), (_, live_state) in zip(seen, live_states):
            torch.testing.assert_close(replayed_state, live_state, rtol=1e-4, atol=1e-4)
        assert len(live_states) == live.cycles  # a decision, hence a state, every cycle at interval 1
    assert top_ks == {2, 3}  # the replay switched between the two recordings


def test_replay_with_the_lookup_branch_equals_live_generate(setup):
    target, prompts, recordings = setup
    environment = _environment(recordings, lookup_tokens=4)
    policy = _policy(target, decision_interval=2)
    policy.fit_normalizer(environment.states(range(len(prompts))))
    grew = False
    for index, ids in enumerate(prompts):
        live = target.generate(
            ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True,
            assistant_model=_eagle3(target), assistant_policy=policy, prompt_lookup_num_tokens=4,
        ).speculation
        replayed = environment.replay_prompt(index, policy)
        assert [c.accepted_length for c in replayed] == live.accepted_lengths
        assert [c.verified_tokens for c in replayed] == live.verified_tokens
        plain = _environment(recordings).replay_prompt(index, policy)
        mean_verified = [sum(c.verified_tokens for c in cycles) / len(cycles) for cycles in (replayed, plain)]
        grew |= mean_verified[0] > mean_verified[1]
    assert grew  # the branch was grafted onto the replayed trees


def test_action_persists_for_the_interval(setup):
    target, prompts, _ = setup
    policy = _policy(target, decision_interval=3, temperature=1.0)
    decided: list[bool] = []
    tree_config = policy.tree_config
    policy.tree_config = lambda state: (tree_config(state), decided.append(policy.decided))[0]
    for ids in prompts[:2]:
        decided.clear()
        target.generate(ids, max_new_tokens=MAX_NEW, assistant_model=_eagle3(target), assistant_policy=policy)
        assert decided == [i % 3 == 0 for i in range(len(decided))]  # a new generate starts with a decision
    policy.train()
    policy.end_episode()
    environment = _environment(setup[2])
    policy.training_interval = 4
    environment.replay_prompt(0, policy)
    policy.end_episode()
    decisions = policy.pop_decisions()
    assert [d.cycles for d in decisions[:-1]] == [4] * (len(decisions) - 1) and 1 <= decisions[-1].cycles <= 4
    assert [d.done for d in decisions] == [False] * (len(decisions) - 1) + [True]
    assert all(d.reward == pytest.approx(d.tokens / d.seconds) for d in decisions)


def test_a_call_whose_prompt_length_continues_the_last_cycle_still_starts_with_a_decision(setup):
    """The first cycle of a call comes at the prompt's length + 1 (the prefill commits a token): a prompt one token
    shorter than where the last call's next cycle would have begun read as that next cycle, so the new call ran on
    the old action, and in training one interval (its reward, its episode) spanned both calls."""
    target, prompts, _ = setup
    policy = _policy(target, decision_interval=1000, training_interval=1000).train()
    decided: list[bool] = []
    tree_config = policy.tree_config
    policy.tree_config = lambda state: (tree_config(state), decided.append(policy.decided))[0]
    first = target.generate(prompts[0], max_new_tokens=MAX_NEW, assistant_model=_eagle3(target),
                            assistant_policy=policy)
    continuing = prompt(policy._next_context - 1, seed=99)  # its first cycle is where the last call's next one was
    decided.clear()
    target.generate(continuing, max_new_tokens=MAX_NEW, assistant_model=_eagle3(target), assistant_policy=policy)
    assert decided[0] and not any(decided[1:])
    policy.end_episode()
    decisions = policy.pop_decisions()
    assert [d.done for d in decisions] == [True, True]  # one episode per call
    assert decisions[0].tokens == first.shape[1] - prompts[0].shape[1] - 1  # the first call's tokens alone


def test_interval_reward_counts_the_tokens_generate_returns(setup):
    """A cycle whose accepted path holds an end-of-sequence token adds only the tokens up to it; the old count
    (accepted drafts + 1 per cycle) is checked to be larger somewhere, so the test fails with it."""
    target, prompts, recordings = setup
    policy = _policy(target, decision_interval=1000, temperature=1.0).train()
    policy.training_interval = 1000
    observed = []
    observe = policy.observe
    policy.observe = lambda feedback: (observed.append(feedback.accepted_length + 1), observe(feedback))[1]
    ids = prompts[0]
    stock = target.generate(ids, max_new_tokens=MAX_NEW, do_sample=False)[0, ids.shape[1]:].tolist()
    overcounted = 0
    for eos in dict.fromkeys(stock[2:]):  # each token of the answer in turn ends it
        observed.clear()
        out = target.generate(ids, max_new_tokens=MAX_NEW, eos_token_id=eos, pad_token_id=eos,
                              assistant_model=_eagle3(target), assistant_policy=policy)
        policy.end_episode()
        (decision,) = policy.pop_decisions()
        assert decision.tokens == out.shape[1] - ids.shape[1] - 1  # all but the prefill's token
        overcounted += sum(observed) > decision.tokens
    assert overcounted  # some end-of-sequence token fell inside an accepted path
    environment = _environment(recordings)
    environment.replay_prompt(0, policy)
    policy.end_episode()
    (replayed,) = policy.pop_decisions()
    assert replayed.tokens == MAX_NEW - 1  # the recording's tokens, none past its end


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_greedy_output_equals_stock_generate(setup, mode):
    target, prompts, _ = setup
    policy = _policy(target, decision_interval=2, training_interval=2, temperature=2.0)
    policy.train(mode == "train")
    for ids in prompts:
        expected = target.generate(ids, max_new_tokens=MAX_NEW)
        out = target.generate(ids, max_new_tokens=MAX_NEW, assistant_model=_eagle3(target), assistant_policy=policy)
        assert torch.equal(out, expected)
    assert (len(policy.pop_decisions()) > 0) == (mode == "train")


def test_save_load_round_trip_gives_identical_decisions(setup, tmp_path):
    target, prompts, recordings = setup
    environment = _environment(recordings)
    policy = _policy(target, decision_interval=7, temperature=0.0)
    policy.fit_normalizer(environment.states(range(len(prompts))))
    policy.save_pretrained(tmp_path)
    loaded = AutoDraftPolicy.from_pretrained(tmp_path)
    assert type(loaded) is ReSpSPolicy and not loaded.training
    assert loaded.actions == policy.actions and loaded.feature_layers == policy.feature_layers
    assert loaded.decision_interval == 7
    for key, value in policy.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    states = list(environment.states(range(len(prompts))))
    assert [_decide(loaded, s) for s in states] == [_decide(policy, s) for s in states]
    assert "resps" in (tmp_path / "README.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "config.json", "model.safetensors"]


class _WatchingReSpS(ReSpSPolicy):
    """Keeps each cycle's prompt-lookup length and whether the cycle took a new decision."""

    def tree_config(self, state):
        tree = super().tree_config(state)
        self.seen.append((state.lookup_length, self.decided))
        return tree


def test_lookup_first_verifies_a_matched_chain_alone_live_and_in_replay(setup):
    """Where the branch matched, the cycle drafts nothing and verifies root + chain whatever action is held; the
    other cycles draft the held action's tree. Stock's tokens, and replay equals live cycle by cycle."""
    target, prompts, recordings = setup
    environment = _environment(recordings, lookup_tokens=4)
    policies = []
    for _ in range(2):
        torch.manual_seed(0)
        policy = _WatchingReSpS.for_target(target.config, actions=GRID, decision_interval=2, lookup_first=True)
        policy.fit_normalizer(environment.states(range(len(prompts))))
        policy.seen = []
        policies.append(policy)
    live_policy, replay_policy = policies
    for index, ids in enumerate(prompts):
        live_policy.seen.clear(), replay_policy.seen.clear()
        out = target.generate(
            ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True,
            assistant_model=_eagle3(target), assistant_policy=live_policy, prompt_lookup_num_tokens=4,
        )
        assert torch.equal(out.sequences, target.generate(ids, max_new_tokens=MAX_NEW, do_sample=False))
        live, matched = out.speculation, [n for n, _ in live_policy.seen]
        assert [d for d, n in zip(live.draft_depths, matched) if n] == [0] * sum(1 for n in matched if n)
        assert [v for v, n in zip(live.verified_tokens, matched) if n] == [1 + n for n in matched if n]
        replayed = environment.replay_prompt(index, replay_policy)
        assert [c.accepted_length for c in replayed] == live.accepted_lengths
        assert [c.draft_depth for c in replayed] == live.draft_depths
        assert [c.verified_tokens for c in replayed] == live.verified_tokens
        assert replay_policy.seen == live_policy.seen
    assert any(n for n, _ in live_policy.seen) and any(d for n, d in live_policy.seen if n)  # a decision in a match
    unmatched = [c for c, (n, _) in zip(replayed, replay_policy.seen) if not n]
    assert any(c.draft_depth for c in unmatched)


def test_a_lookup_first_policy_needs_the_branch_and_is_compared_with_lookup_first_trees(setup, tmp_path):
    target, _, recordings = setup
    args = ReSpSConfig(output_dir=str(tmp_path), report_to=[], disable_tqdm=True)
    with pytest.raises(ValueError, match="lookup_first=True but the replay has no prompt-lookup branch"):
        ReSpSTrainer(_policy(target, lookup_first=True), args, environment=_environment(recordings))
    environment = _environment(recordings, lookup_tokens=4)
    trainer = ReSpSTrainer(_policy(target, lookup_first=True), args, environment=environment, eval_dataset=[0, 1])
    best, speed = trainer.best_static([0, 1])
    lookup_first = hfas.LookupFirstPolicy(depth=best.depth, top_k=best.top_k, total_tokens=best.total_tokens)
    assert speed == pytest.approx(environment.replay(lookup_first, (0, 1)).tokens_per_second, rel=1e-4)  # policy time
    static = environment.replay(hfas.StaticTreePolicy(**vars(best)), (0, 1)).tokens_per_second
    assert speed != pytest.approx(static, rel=1e-2)
    trainer.save_model(str(tmp_path / "saved"))
    assert ReSpSPolicy.from_pretrained(tmp_path / "saved").lookup_first
    assert "`lookup_first`" in (tmp_path / "saved" / "README.md").read_text()


def test_the_script_builds_a_lookup_first_policy_and_refuses_to_continue_one_without_it(setup, tmp_path):
    from hf_adaptive_spec.training.resps.script import ReSpSScriptArguments, build_policy

    _, _, recordings = setup
    environment, args = _environment(recordings, lookup_tokens=4), ReSpSConfig(output_dir=str(tmp_path), report_to=[])
    policy = build_policy(ReSpSScriptArguments(lookup_tokens=4, lookup_first=True), args, environment)
    assert policy.lookup_first
    build_policy(ReSpSScriptArguments(lookup_tokens=4), args, environment).save_pretrained(tmp_path / "plain")
    continued = ReSpSScriptArguments(lookup_tokens=4, lookup_first=True, init_from=str(tmp_path / "plain"))
    with pytest.raises(ValueError, match="was trained without it: drop --init_from"):
        build_policy(continued, args, environment)


def _decide(policy: ReSpSPolicy, state) -> hfas.TreeConfig:
    policy.end_episode()
    return policy.tree_config(state)


def _train(recordings, tmp_path, trainer_class=None, **overrides) -> ReSpSTrainer:
    target = tiny_model("llama")
    args = dict(
        output_dir=str(tmp_path), max_steps=200, n_steps=64, per_device_train_batch_size=64, training_interval=2,
        learning_rate=1e-3, logging_steps=8, save_strategy="no", report_to=[], seed=0, disable_tqdm=True,
    )
    args.update(overrides)
    policy = _policy(target, training_interval=args["training_interval"])
    trainer_class = trainer_class or ReSpSTrainer
    environment = _environment(recordings)
    return trainer_class(policy=policy, args=ReSpSConfig(**args), environment=environment, eval_dataset=[0, 1, 2, 3])


class _NegatedReward(ReSpSTrainer):
    def compute_rewards(self, decisions):
        return -super().compute_rewards(decisions)


@pytest.mark.parametrize("trainer_class", [ReSpSTrainer, _NegatedReward], ids=["reward", "negated-reward"])
def test_training_on_replay_raises_the_replayed_reward(setup, tmp_path, trainer_class):
    trainer = _train(setup[2], tmp_path, trainer_class)
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    if trainer_class is ReSpSTrainer:
        assert after["eval_tokens_per_second"] > before["eval_tokens_per_second"]
        assert after["eval_vs_best_static"] > 0.95
    else:  # the same run with the reward negated learns to be slow: the test can fail
        assert after["eval_tokens_per_second"] < before["eval_tokens_per_second"]
        assert after["eval_vs_best_static"] < 0.8
    logs = [entry for entry in trainer.state.log_history if "reward_tokens_per_second" in entry]
    assert {"policy_loss", "value_loss", "entropy", "approx_kl", "tau", "distinct_actions"} <= set(logs[-1])


def test_training_saves_a_loadable_policy_and_resumes_exactly(setup, tmp_path):
    schedule = dict(max_steps=24, n_steps=32, per_device_train_batch_size=16, save_strategy="steps", save_steps=8)
    straight = _train(setup[2], tmp_path / "straight", **schedule)
    straight.train()
    straight.save_model(str(tmp_path / "final"))
    checkpoint = tmp_path / "straight" / "checkpoint-8"
    assert (checkpoint / "resps_rollouts_0.json").is_file() and (checkpoint / "model.safetensors").is_file()
    files = sorted(p.name for p in (tmp_path / "final").iterdir())
    assert files == ["README.md", "config.json", "model.safetensors", "training_config.json"]
    card = (tmp_path / "final" / "README.md").read_text()
    assert "library_name: hf-adaptive-spec" in card and "3 updates of 32 decisions" in card
    assert json.loads((tmp_path / "final" / "training_config.json").read_text())["ent_coef"] == 0.1
    loaded = AutoDraftPolicy.from_pretrained(tmp_path / "final")

    resumed = _train(setup[2], tmp_path / "resumed", **schedule)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.rollouts.stream == straight.rollouts.stream
    for key, value in straight.policy.state_dict().items():
        assert torch.equal(resumed.policy.state_dict()[key], value), key
        assert torch.equal(loaded.state_dict()[key], value), key


def test_generation_episodes_discount_across_decisions(setup, tmp_path):
    trainer = _train(setup[2], tmp_path, independent_decisions=False, n_steps=48)
    batch, advantages, returns = trainer.rollouts.collect()
    assert len(batch) == 48 and 0 < batch.dones.sum() < 48  # episodes end with their generation only
    assert torch.allclose(returns, advantages + batch.values)
    assert not torch.allclose(returns, batch.rewards)  # later decisions' rewards are discounted in
    independent = _train(setup[2], tmp_path, n_steps=48).rollouts.collect()
    assert bool(independent[0].dones.all()) and torch.allclose(independent[2], independent[0].rewards)


def _replayed_trees(environment: MultiReplayEnvironment, policy: ReSpSPolicy) -> list[tuple[int, int, int]]:
    return [(c.draft_depth, c.verified_tokens, c.accepted_length) for c in environment.replay(policy).all_cycles]


def test_after_training_the_policy_decides_as_its_saved_copy(setup, tmp_path):
    """train() left the policy in train() mode: trainer.policy sampled, so two replays built other trees, and logged
    every decision."""
    trainer = _train(setup[2], tmp_path, max_steps=4, n_steps=16, per_device_train_batch_size=16)
    trainer.train()
    policy = trainer.policy
    assert not policy.training
    first = _replayed_trees(trainer.environment, policy)
    assert _replayed_trees(trainer.environment, policy) == first and not policy.decisions
    trainer.save_model(str(tmp_path / "final"))
    assert _replayed_trees(trainer.environment, AutoDraftPolicy.from_pretrained(tmp_path / "final")) == first


def test_a_prompt_whose_generation_ended_at_its_first_token_is_left_out_of_training(setup, tmp_path):
    """Training crashed when the shuffled order reached it: 'position 0 is outside the 0 cycle starts the
    recordings share for prompt 1: give 0 to -1'."""
    target, _, recordings = setup
    ended = [dataclasses.replace(r, prompts=[trees if p != 1 else [] for p, trees in enumerate(r.prompts)])
             for r in recordings]
    args = ReSpSConfig(output_dir=str(tmp_path), max_steps=8, n_steps=16, per_device_train_batch_size=16,
                       training_interval=2, save_strategy="no", report_to=[], seed=0, disable_tqdm=True,
                       decision_seconds=1e-4)
    trainer = ReSpSTrainer(policy=_policy(target, training_interval=2), args=args, environment=_environment(ended),
                           eval_dataset=[0, 1])
    assert sorted(trainer.rollouts.prompts) == [0, 2, 3]
    trainer.train()
    assert trainer.state.global_step == 8


@pytest.mark.parametrize("dataset", ["train_dataset", "eval_dataset"])
@pytest.mark.parametrize("index", [4, 9, -1])
def test_prompt_indices_outside_the_recordings_are_refused_when_the_trainer_is_made(setup, tmp_path, dataset, index):
    """train_dataset=[7] raised a bare IndexError, eval_dataset=[9] was accepted and raised one in evaluate() after
    training; replay(policy, [5]) raised one too."""
    target, _, recordings = setup
    message = rf"prompt {index} is outside the 4 prompts the recordings share: give 0 to 3"
    with pytest.raises(ValueError, match=rf"^{dataset}: {message}"):
        ReSpSTrainer(policy=_policy(target), args=ReSpSConfig(output_dir=str(tmp_path), report_to=[]),
                     environment=_environment(recordings), **{dataset: [0, index]})
    with pytest.raises(ValueError, match=rf"^{message}"):
        _environment(recordings).replay(hfas.StaticTreePolicy(2, 2, 4), [index])


def test_misconfigured_runs_are_refused(setup, tmp_path):
    with pytest.raises(ValueError, match="multiple of the 8 steps"):
        ReSpSConfig(output_dir=str(tmp_path), save_strategy="steps", save_steps=12)
    target, _, recordings = setup
    wide = ReSpSPolicy.for_target(target.config, actions=[(6, 4, 4)])
    with pytest.raises(ValueError, match="outside the recordings"):
        ReSpSTrainer(wide, ReSpSConfig(output_dir=str(tmp_path), report_to=[]), environment=_environment(recordings))


_DDP_ENTRY = """
import sys
from pathlib import Path
import torch
from hf_adaptive_spec.training.base import end_process_group
from hf_adaptive_spec.training.resps.script import main, make_parser
torch.set_num_threads(1)
script_args, training_args = make_parser().parse_args_and_config(args=sys.argv[1:])
trainer = main(script_args, training_args)
weights = torch.cat([p.detach().flatten().double() for p in trainer.policy.parameters()])
prompts = trainer.rollouts.prompts
Path(training_args.output_dir, f"rank{trainer.args.process_index}.txt").write_text(
    f"{trainer.args.world_size} {weights.sum().item():.12e} {weights.abs().sum().item():.12e} {prompts}"
)
end_process_group()
"""


def test_two_cpu_ranks_train_through_the_script(setup, tmp_path):
    """torchrun --nproc_per_node 2 (gloo): each rank replays its own prompts; DDP averages the gradients."""
    folders = []
    for recording in setup[2]:
        folder = tmp_path / f"recording_k{recording.tree_config.top_k}"
        recording.save(folder)
        folders.append(str(folder))
    _profile().save(tmp_path / "profile.json")
    entry = tmp_path / "entry.py"
    entry.write_text(_DDP_ENTRY)
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(entry),
        "--recordings", *folders, "--hardware_profile", str(tmp_path / "profile.json"),
        "--target_num_hidden_layers", "4", "--output_dir", str(out), "--max_steps", "16", "--n_steps", "16",
        "--per_device_train_batch_size", "8", "--ppo_epochs", "2", "--training_interval", "2", "--save_steps", "8",
        "--report_to", "none", "--ddp_backend", "gloo",
        "--grid_total_tokens", "4", "6", "8", "--grid_depths", "3", "4", "--grid_top_ks", "2", "3",
        "--lookup_tokens", "4",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-6000:]
    ranks = [(out / f"rank{r}.txt").read_text().split(" ", 3) for r in (0, 1)]
    assert ranks[0][0] == ranks[1][0] == "2"  # a real two-process world
    assert ranks[0][1:3] == ranks[1][1:3]  # DDP kept the policies equal
    assert ranks[0][3] == "[0, 2]" and ranks[1][3] == "[1, 3]"  # each replays its own prompts
    assert (out / "checkpoint-8" / "resps_rollouts_1.json").is_file()
    policy = AutoDraftPolicy.from_pretrained(out)
    assert isinstance(policy, ReSpSPolicy)
    assert [(a.total_tokens, a.depth, a.top_k) for a in policy.actions] == list(GRID)
    assert "prompt_lookup_num_tokens=4" in (out / "README.md").read_text()  # trained on replays with the branch
