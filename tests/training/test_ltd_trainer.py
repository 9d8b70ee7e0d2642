"""LTD training on a tiny replay recording: learning, the reward's sign, resuming, the script, two ranks."""

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
from hf_adaptive_spec.environments import ReplayEnvironment, ReplayRecording, ReplayResult, record_replay
from hf_adaptive_spec.policies.base import CycleState, TreeConfig
from hf_adaptive_spec.policies.ltd import LTDPolicy
from hf_adaptive_spec.policies.serialization import AutoDraftPolicy
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training.ltd import LTDConfig, LTDTrainer, Phase, build_schedule
from hf_adaptive_spec.training.ltd.phases import PhasePolicy
from hf_adaptive_spec.training.ltd.script import main, make_parser

torch.set_num_threads(1)

RECORDED = TreeConfig(depth=4, top_k=3, total_tokens=9)
SMALL = dict(depth_actor=(32,), depth_critic=(32,), size_actor=(32,), size_critic=(32,))
# verification is nearly flat up to 8 tokens and drafting is cheap: deep, wide trees pay off
PROFILE = HardwareProfile(
    device="cpu", dtype="float32", num_threads=1, context_length=64,
    verify_tokens=[1, 2, 4, 8, 9], verify_seconds=[1.0, 1.0, 1.02, 1.1, 1.12], draft_step_seconds=0.03,
)


@pytest.fixture(scope="module")
def recording_dir(tmp_path_factory) -> Path:
    target = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(target, 3)
    recording = record_replay(target, drafter, [prompt(8, seed=s) for s in range(6)], RECORDED, 40)
    folder = tmp_path_factory.mktemp("recording")
    recording.save(folder)
    PROFILE.save(folder / "profile.json")
    return folder


@pytest.fixture(scope="module")
def environment(recording_dir) -> ReplayEnvironment:
    return ReplayEnvironment(ReplayRecording.load(recording_dir), PROFILE)


def _modelled_tokens_per_second(result: ReplayResult) -> float:
    """Throughput with the profile's times only (the measured policy time left out: deterministic)."""
    cycles = result.all_cycles
    return sum(c.accepted_length + 1 for c in cycles) / sum(c.draft_time + c.verify_time for c in cycles)


def _stopping_policy(seed: int) -> LTDPolicy:
    """A small untrained policy that greedily stops at depth 1 and verifies one candidate: clearly improvable."""
    torch.manual_seed(seed)
    policy = LTDPolicy(depth=RECORDED.depth, top_k=RECORDED.top_k, total_tokens=RECORDED.total_tokens, **SMALL)
    with torch.no_grad():
        policy.depth_head.actor[-1].bias[0] = 1.0  # STOP
        policy.size_head.actor[-1].bias[0] = 1.0  # size_choices[0] = 1
    return policy


def _args(output_dir: Path, **overrides) -> LTDConfig:
    fields = dict(
        output_dir=str(output_dir), n_steps=64, minibatch_size=32, size_warmup_steps=20, depth_warmup_steps=20,
        collaborative_rounds=1, steps_per_phase=20, reward_scale=1.0, learning_rate=5e-3, logging_steps=10,
        save_strategy="no", report_to=[], disable_tqdm=True, seed=0,
    )
    return LTDConfig(**{**fields, **overrides})


class FlippedRewardTrainer(LTDTrainer):
    def cycle_reward(self, cycle):
        return -super().cycle_reward(cycle)


def test_training_improves_the_replayed_throughput(environment, tmp_path):
    policy = _stopping_policy(seed=1)
    before = _modelled_tokens_per_second(environment.replay(policy))
    best_static = max(
        _modelled_tokens_per_second(environment.replay(hfas.StaticTreePolicy(depth=d, top_k=3, total_tokens=n)))
        for d in (1, 2, 3, 4) for n in (2, 3, 5, 9)
    )
    assert before < 0.8 * best_static
    trainer = LTDTrainer(policy, _args(tmp_path), environment)
    trainer.train()
    after = _modelled_tokens_per_second(environment.replay(policy.eval()))
    assert after > 1.15 * before and after > 0.9 * best_static
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    assert rewards[-1] > rewards[0]


def test_training_with_the_reward_flipped_does_not_improve(environment, tmp_path):
    policy = _stopping_policy(seed=1)
    before = _modelled_tokens_per_second(environment.replay(policy))
    FlippedRewardTrainer(policy, _args(tmp_path), environment).train()
    assert _modelled_tokens_per_second(environment.replay(policy.eval())) <= before * 1.01


def _weights(policy: LTDPolicy) -> dict[str, torch.Tensor]:
    return {key: value.clone() for key, value in policy.state_dict().items()}


#: PROFILE with a catch-up table: a cycle's drafting time depends on the committed tokens the drafter has not read
CATCH_UP_PROFILE = HardwareProfile(
    device="cpu", dtype="float32", num_threads=1, context_length=64, verify_tokens=[1, 2, 4, 8, 9],
    verify_seconds=[1.0, 1.0, 1.02, 1.1, 1.12], draft_step_seconds=0.03, catch_up_tokens=[1.0, 8.0],
    catch_up_seconds=[0.01, 0.5],
)


@pytest.mark.parametrize("catch_up", [False, True], ids=["flat-profile", "catch-up-table"])
def test_resume_from_a_checkpoint_continues_exactly(environment, recording_dir, tmp_path, catch_up):
    """With a catch-up table the cursor's unread tokens time the first cycle after resuming: they are saved too."""
    if catch_up:
        environment = ReplayEnvironment(ReplayRecording.load(recording_dir), CATCH_UP_PROFILE)
    schedule = dict(size_warmup_steps=4, depth_warmup_steps=4, steps_per_phase=4)  # 16 steps, 2 per rollout
    uninterrupted = _stopping_policy(seed=1)
    LTDTrainer(uninterrupted, _args(tmp_path / "a", **schedule), environment).train()

    first = _stopping_policy(seed=1)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "script_args.json").write_text('{"recording_dir": "rec"}')  # as run_training_script writes it
    LTDTrainer(first, _args(tmp_path / "b", save_strategy="steps", save_steps=5, **schedule), environment).train()
    checkpoint = tmp_path / "b" / "checkpoint-5"  # mid-rollout, in the depth warm-up
    files = {p.name for p in checkpoint.iterdir()}
    assert {"config.json", "model.safetensors", "README.md", "ltd_rollout_state_rank0.safetensors"} <= files
    assert (checkpoint / "script_args.json").read_text() == '{"recording_dir": "rec"}'  # the run's, kept with it
    assert "pytorch_model.bin" not in files and "training_args.bin" not in files

    resumed = _stopping_policy(seed=7)  # other initial weights: they must come from the checkpoint
    trainer = LTDTrainer(resumed, _args(tmp_path / "c", **schedule), environment)
    trainer.train(resume_from_checkpoint=str(checkpoint))
    assert trainer.state.global_step == 16
    expected = _weights(uninterrupted)
    for key, value in _weights(resumed).items():
        torch.testing.assert_close(value, expected[key], rtol=0, atol=1e-6, msg=key)


def _short_schedule(tmp_path: Path, **overrides) -> LTDConfig:
    """16 optimizer steps, 2 per rollout: the depth and the size head each learn."""
    return _args(tmp_path, size_warmup_steps=4, depth_warmup_steps=4, steps_per_phase=4, **overrides)


def _trees(environment: ReplayEnvironment, policy: LTDPolicy) -> list[tuple[int, int]]:
    return [(c.draft_depth, c.verified_tokens) for c in environment.replay(policy).all_cycles]


def test_after_training_the_policy_decides_as_its_saved_copy(environment, tmp_path):
    """train() left policy.training False with the last phase's head in train() mode: trainer.policy sampled, so two
    replays built other trees, and logged every decision."""
    trainer = LTDTrainer(_stopping_policy(seed=1), _short_schedule(tmp_path), environment)
    trainer.train()
    policy = trainer.policy
    assert not policy.training and not policy.depth_head.training and not policy.size_head.training
    first = _trees(environment, policy)
    assert _trees(environment, policy) == first and not policy.decisions
    trainer.save_model(str(tmp_path / "final"))
    assert _trees(environment, AutoDraftPolicy.from_pretrained(tmp_path / "final")) == first


@pytest.mark.filterwarnings("ignore::hf_adaptive_spec.environments.replay_checks.ExtrapolatedCostWarning")
def test_an_eval_environment_that_cannot_replay_the_policy_is_refused_before_training(environment, tmp_path):
    """Only the training environment was checked: all the steps ran, then evaluate() raised and nothing was saved."""
    recording = environment.recording
    shallow = dataclasses.replace(recording, tree_config=TreeConfig(depth=2, top_k=3, total_tokens=6))
    with pytest.raises(ValueError, match=r"^eval_environment: TreeConfig\(depth=4.* is outside the recording's trees "
                                         r"\(top_k 3, depth <= 2, total_tokens <= 6"):
        LTDTrainer(_stopping_policy(seed=1), _short_schedule(tmp_path), environment,
                   eval_environment=ReplayEnvironment(shallow, PROFILE))
    lookup_policy = LTDPolicy(depth=4, top_k=3, total_tokens=9, lookup_feature=True, **SMALL)
    with pytest.raises(ValueError, match=r"^eval_environment: This LTDPolicy has lookup_feature=True"):
        LTDTrainer(lookup_policy, _short_schedule(tmp_path), ReplayEnvironment(recording, PROFILE, lookup_tokens=4),
                   eval_environment=environment)


def test_a_prompt_whose_generation_ended_at_its_first_token_is_left_out_of_training(tmp_path):
    """Training crashed when the shuffled order reached it: 'position 0 is outside prompt 1's 0 recorded cycle
    starts: give 0 to -1'."""
    target = tiny_model("llama")
    prompts = [prompt(8, seed=s) for s in range(3)]
    first_token = int(target(prompts[1]).logits[0, -1].argmax())
    recording = record_replay(target, hfas.CausalLMDrafter.from_target_layers(target, 3), prompts, RECORDED, 20,
                              eos_token_ids=(first_token,))
    assert [len(trees) > 0 for trees in recording.prompts] == [True, False, True]
    environment = ReplayEnvironment(recording, PROFILE)
    trainer = LTDTrainer(_stopping_policy(seed=1), _short_schedule(tmp_path), environment)
    assert sorted(trainer.rollouts.prompts) == [0, 2]
    trainer.train()
    assert trainer.state.global_step == 16


@pytest.mark.parametrize("other", ["fewer-prompts", "other-generations"])
def test_resuming_on_another_recording_is_refused_naming_the_checkpoints_recording(environment, tmp_path, other):
    """The saved cursor was read against the new recording: 'prompt 4 is outside the recording's 2 prompts' (the
    prompt came from the checkpoint), or, with as many prompts, training went on over other generations."""
    LTDTrainer(_stopping_policy(seed=1), _short_schedule(tmp_path / "a", save_strategy="steps", save_steps=5),
               environment).train()
    recording = environment.recording
    prompts = recording.prompts[:2] if other == "fewer-prompts" else recording.prompts[::-1]
    ids = recording.prompt_ids[: len(prompts)] if other == "fewer-prompts" else recording.prompt_ids[::-1]
    elsewhere = ReplayEnvironment(dataclasses.replace(recording, prompts=prompts, prompt_ids=ids), PROFILE)
    trainer = LTDTrainer(_stopping_policy(seed=1), _short_schedule(tmp_path / "b"), elsewhere)
    with pytest.raises(ValueError, match=r"checkpoint-5 was saved by an LTD run on another recording \(or other "
                                         r"prompts\).*Resume with the recording it was trained on, or train afresh "
                                         r"without resume_from_checkpoint"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "a" / "checkpoint-5"))


def test_a_checkpoint_without_the_recordings_digest_is_checked_by_its_cursor(environment):
    """Checkpoints written before the cursor held the digest: a cursor whose prompts this run does not replay is
    refused with the same message; one that fits resumes."""
    from hf_adaptive_spec.training.ltd import ReplayRollouts

    rollouts = ReplayRollouts(environment, [0, 1], torch.Generator().manual_seed(0))
    legacy = {key: value for key, value in rollouts.state_dict().items() if key != "recording"}
    rollouts.check_cursor(legacy, "ckpt")
    for cursor in ({**legacy, "order": [4, 0]}, {**legacy, "position": 10_000}):
        with pytest.raises(ValueError, match=r"ckpt was saved by an LTD run on another recording"):
            rollouts.check_cursor(cursor, "ckpt")


def test_schedule_and_config_checks(tmp_path):
    args = _args(tmp_path, size_warmup_steps=4, depth_warmup_steps=0, collaborative_rounds=1, steps_per_phase=2)
    assert args.max_steps == 8 and args.updates_per_rollout == 2
    policy = LTDPolicy(total_tokens=9, depth=4, **SMALL)
    assert build_schedule(args, policy) == [Phase("size", 4, random_depth=True), Phase("depth", 2), Phase("size", 2)]
    with pytest.raises(ValueError, match="multiple of the updates per rollout"):
        _args(tmp_path, size_warmup_steps=3)
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        _args(tmp_path, gradient_accumulation_steps=2)
    with pytest.raises(ValueError, match="exceeds the schedule"):
        _args(tmp_path, max_steps=1000)


def test_policies_outside_the_recording_are_refused(environment, tmp_path):
    with pytest.raises(ValueError, match="outside the recording"):
        LTDTrainer(LTDPolicy(depth=5, top_k=3, total_tokens=9, **SMALL), _args(tmp_path), environment)


@pytest.mark.parametrize("setting", ["lookup_feature", "lookup_first"])
def test_a_lookup_aware_policy_needs_a_replay_with_the_branch(environment, tmp_path, setting):
    policy = LTDPolicy(depth=4, top_k=3, total_tokens=9, **{setting: True}, **SMALL)
    with pytest.raises(ValueError, match=f"{setting}=True .* lookup_tokens=N"):
        LTDTrainer(policy, _args(tmp_path), environment)


def test_a_head_that_is_never_asked_is_reported(environment, tmp_path):
    policy = LTDPolicy(depth=1, top_k=3, total_tokens=9, **SMALL)  # depth 1: continue_drafting is never called
    trainer = LTDTrainer(policy, _args(tmp_path, size_warmup_steps=0), environment)
    with pytest.raises(ValueError, match="depth head was never asked"):
        trainer.train()


def _script_argv(recording_dir: Path, output_dir: Path) -> list[str]:
    return [
        "--recording_dir", str(recording_dir), "--profile_path", str(recording_dir / "profile.json"),
        "--output_dir", str(output_dir), "--size_warmup_steps", "4", "--depth_warmup_steps", "4",
        "--collaborative_rounds", "1", "--steps_per_phase", "2", "--n_steps", "32", "--minibatch_size", "16",
        "--size_choices", "1", "2", "4", "8", "--dataset_name", "tiny prompts",
        "--reproduce_command", "python trainers/ltd.py",
        "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true",
    ]


def test_script_trains_evaluates_and_saves_a_loadable_policy(recording_dir, tmp_path):
    script_args, training_args = make_parser().parse_args_and_config(args=_script_argv(recording_dir, tmp_path / "out"))
    trainer = main(script_args, training_args)
    out = tmp_path / "out"
    files = sorted(p.name for p in out.iterdir())
    assert files == ["README.md", "config.json", "model.safetensors", "training_config.json"]
    card = (out / "README.md").read_text()
    assert "library_name: hf-adaptive-spec" in card and "- ltd" in card and "replay of tiny prompts" in card
    assert "python trainers/ltd.py" in card and "12 minibatch updates" in card
    assert json.loads((out / "training_config.json").read_text())["n_steps"] == 32
    loaded = AutoDraftPolicy.from_pretrained(out)
    assert loaded.size_choices == [1, 2, 4, 8] and loaded.tree == RECORDED
    for key, value in trainer.policy.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert any("eval_speedup" in entry for entry in trainer.state.log_history)


def test_script_trains_a_lookup_aware_policy_on_the_lookup_branch(recording_dir, tmp_path):
    argv = _script_argv(recording_dir, tmp_path / "out") + ["--lookup_tokens", "4", "--lookup_feature", "true"]
    trainer = main(*make_parser().parse_args_and_config(args=argv))
    assert trainer.rollouts.environment.lookup_tokens == 4
    assert any(c.verified_tokens > 9 for c in trainer.rollouts.environment.replay(trainer.policy).all_cycles)
    loaded = AutoDraftPolicy.from_pretrained(tmp_path / "out")
    assert loaded.lookup_feature and loaded.depth_head.actor[0].in_features == 2 + 1 + RECORDED.top_k**2
    assert "assistant_policy=policy, prompt_lookup_num_tokens=4)" in (tmp_path / "out" / "README.md").read_text()


def test_script_trains_a_lookup_first_policy_whose_heads_decide_only_unmatched_cycles(recording_dir, tmp_path):
    argv = _script_argv(recording_dir, tmp_path / "out") + ["--lookup_tokens", "4", "--lookup_first", "true"]
    trainer = main(*make_parser().parse_args_and_config(args=argv))
    warmup = PhasePolicy(trainer.policy, Phase("size", 1, random_depth=True), torch.Generator().manual_seed(0))
    assert warmup.tree_config(CycleState(context_length=9, lookup_length=3)).depth == 0  # a matched cycle: undrafted
    assert {warmup.tree_config(CycleState(context_length=9)).depth for _ in range(20)} == {1, 2, 3, 4}
    cycles = trainer.rollouts.collect(trainer.policy, Phase("size", 1, random_depth=True), 32, lambda c: 0.0).cycles
    assert any(c.draft_depth == 0 and c.verified_tokens > 1 for c in cycles)  # a chain verified alone
    _, static = trainer.replay()
    assert any(c.draft_depth == 0 and c.verified_tokens > 1 for c in static.all_cycles)  # the card's tree: lookup-first
    loaded = AutoDraftPolicy.from_pretrained(tmp_path / "out")
    assert loaded.lookup_first and not loaded.lookup_feature
    assert "drafted nothing (`lookup_first`)" in (tmp_path / "out" / "README.md").read_text()


def test_two_cpu_ranks_train_on_different_prompts_and_agree(recording_dir, tmp_path):
    """torchrun --nproc_per_node 2 (gloo): each rank replays its own prompts; DDP keeps the weights equal."""
    out = tmp_path / "out"
    entry = Path(__file__).with_name("ltd_ddp_entry.py")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(entry),
               *_script_argv(recording_dir, out), "--ddp_backend", "gloo"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-6000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["world_size"] == ranks[1]["world_size"] == 2
    assert ranks[0]["prompts"] == [0, 2, 4] and ranks[1]["prompts"] == [1, 3, 5]
    assert ranks[0]["weights"] == ranks[1]["weights"]
    assert (out / "model.safetensors").is_file()
