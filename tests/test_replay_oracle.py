"""``examples/replay_oracle.py``'s hindsight programme charges the drafter's catch-up: skipping the drafter leaves
committed tokens for the next drafting cycle's first step to read, priced by the profile's catch-up table."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from example_scripts import load_example

from hf_adaptive_spec.environments.replay import ReplayedCycle
from hf_adaptive_spec.profiling.hardware import HardwareProfile, unread_after


@pytest.fixture(scope="module")
def oracle():
    return load_example("replay_oracle")


def profile() -> HardwareProfile:
    """One second per committed token the first draft step reads, one more per later level."""
    return HardwareProfile(
        device="cpu", dtype="float32", num_threads=1, context_length=8, verify_tokens=[1, 8], verify_seconds=[1.0, 1.0],
        draft_step_seconds=1.0, policy_call_seconds=0.0, catch_up_tokens=[1, 100], catch_up_seconds=[1.0, 100.0],
    )


def cycle(committed: int, levels: int, verify: float, remaining: int) -> ReplayedCycle:
    return ReplayedCycle(
        context_length=10, draft_depth=levels, verified_tokens=1 + levels, accepted_length=committed - 1,
        draft_time=0.0, verify_time=verify, policy_time=0.0, drafter_accepted_length=committed - 1,
        remaining_tokens=remaining, draft_levels=levels,
    )


def enumerated_least_seconds(outcomes: dict, positions: int, allowed: list[str], prompt_length: int) -> float:
    """Every sequence of choices walked from the start, the unread tokens carried along: the least total."""
    best = float("inf")
    for choices in itertools.product(allowed, repeat=positions):
        position, unread, seconds = 0, prompt_length, 0.0
        for name in choices:
            if position >= positions:
                break
            chosen = outcomes[position, name]
            seconds += chosen.verify_time + profile().draft_time(chosen.draft_levels, unread)
            unread = unread_after(unread, chosen.drafted, chosen.committed_tokens)
            position += chosen.committed_tokens
        best = min(best, seconds)
    return best


def test_skipping_the_drafter_is_charged_when_it_drafts_again(oracle):
    # A plain step costs 2 s for one token; the tree costs 1 s of verification plus its catch-up for 2 tokens.
    outcomes = {}
    for position in range(4):
        outcomes[position, "plain"] = cycle(1, 0, 2.0, 4 - position)
        outcomes[position, "tree"] = cycle(2, 1, 1.0, 4 - position)
    # tree, tree: (1 + the 3 prompt tokens) + (1 + the 2 tokens the first tree committed) = 7 s (charging one token
    # after the prompt would give 6 s); tree, plain, plain: 4 + 2 + 2 = 8 s; plain, plain, tree: 2 + 2 + (1 + 5) = 10 s
    assert oracle.least_seconds(outcomes, 4, ["plain", "tree"], profile(), prompt_length=3) == pytest.approx(7.0)
    # with a prompt of 20 tokens the first drafting cycle reads all of them whenever it comes: still one tree first
    assert oracle.least_seconds(outcomes, 4, ["plain", "tree"], profile(), prompt_length=20) == pytest.approx(
        enumerated_least_seconds(outcomes, 4, ["plain", "tree"], 20)
    )


@pytest.mark.parametrize("seed", range(5))
def test_the_programme_finds_the_least_time_of_every_choice_sequence(oracle, seed):
    rng = random.Random(seed)
    positions, names = 6, ["plain", "small", "deep"]
    outcomes = {}
    for position in range(positions):
        remaining = positions - position
        outcomes[position, "plain"] = cycle(1, 0, rng.uniform(1.0, 2.0), remaining)
        outcomes[position, "small"] = cycle(rng.randint(1, 2), 1, rng.uniform(1.0, 2.0), remaining)
        outcomes[position, "deep"] = cycle(rng.randint(1, 4), 3, rng.uniform(1.0, 3.0), remaining)
    prompt_length = rng.randint(1, 8)
    assert oracle.least_seconds(outcomes, positions, names, profile(), prompt_length) == pytest.approx(
        enumerated_least_seconds(outcomes, positions, names, prompt_length)
    )


@pytest.fixture(scope="module")
def score_ceiling(oracle):
    return load_example("replay_score_ceiling")


@pytest.fixture(scope="module")
def environment():
    import torch
    from tiny_models import prompt, tiny_model

    import hf_adaptive_spec as hfas
    from hf_adaptive_spec.environments import ReplayEnvironment, record_replay
    from hf_adaptive_spec.policies.base import TreeConfig

    torch.set_num_threads(1)
    target = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(target, 2)
    repeated = torch.cat([prompt(6, seed=21)] * 3, dim=1)  # the prompt-lookup branch finds chains in it
    recording = record_replay(target, drafter, [repeated, prompt(9, seed=22)],
                              TreeConfig(depth=3, top_k=2, total_tokens=5), 14)
    return ReplayEnvironment(recording, profile(), lookup_tokens=2)


@pytest.mark.parametrize("lookup_first", [False, True])
def test_the_ceilings_walk_the_static_baseline_as_the_replay_does(oracle, score_ceiling, environment, lookup_first):
    """The score ceiling's walk and the oracle's programme restricted to the baseline charge what
    ``ReplayEnvironment.replay`` charges (the unread tokens tracked alike; the policy's own time aside)."""
    import argparse

    shapes = oracle.recorded_shapes(environment)
    names = list(shapes)
    static, plain = names.index(oracle.shape_name(2, 3)), names.index(oracle.PLAIN_STEP)
    args = argparse.Namespace(after_level=1, with_history=True, lookup_tokens=2, target_state_components=0)
    _, _, outcomes, _, found = score_ceiling.gather(environment, shapes, args)
    assert found.any() and not found.all()
    rate, _, _ = score_ceiling.walk(lambda row: plain if lookup_first and found[row] else static, outcomes)

    result = environment.replay(oracle.static_policy(2, 2, 3, lookup_first))
    caught_up = [
        c.unread_tokens > before.committed_tokens for p in result.cycles for before, c in itertools.pairwise(p)
    ]
    assert any(caught_up) == lookup_first  # a drafting cycle after skipped ones reads what they committed
    replayed = result.all_cycles
    seconds = sum(c.draft_time + c.verify_time for c in replayed)
    assert rate == pytest.approx(sum(c.committed_tokens for c in replayed) / seconds)
    if not lookup_first:
        programme = sum(
            oracle.least_seconds(oracle.replay_outcomes(environment, p, shapes), environment.num_positions(p),
                                 [oracle.shape_name(2, 3)], environment.profile, environment.prompt_length(p))
            for p in range(environment.num_prompts)
        )
        assert programme == pytest.approx(seconds)


def test_the_nonlinear_rule_learns_what_the_linear_one_cannot(score_ceiling):
    """An interaction (tokens = x0 · x1, XOR-like): no linear rule predicts it, the MLP does, both cross-validated
    by prompt; the predictors are what the ceiling's rules are fitted with."""
    rng = np.random.default_rng(0)
    signs = rng.choice([-1.0, 1.0], size=(400, 2))
    features = np.concatenate([signs + rng.normal(0, 0.05, signs.shape), np.ones((400, 1))], axis=1)
    tokens = np.stack([signs[:, 0] * signs[:, 1], np.zeros(400)], axis=1)
    prompt_of = np.arange(400) // 10
    errors = {}
    for name, fit in {"ridge": score_ceiling.ridge_fit(1.0), "mlp": score_ceiling.mlp_fit(epochs=500)}.items():
        predicted = score_ceiling.cross_validated_predictions(features, tokens, prompt_of, 4, fit)
        errors[name] = float(np.mean((predicted[:, 0] - tokens[:, 0]) ** 2))
    assert errors["ridge"] > 0.9 and errors["mlp"] < 0.1, errors


@pytest.fixture(scope="module")
def saved(environment, tmp_path_factory):
    """The recording and profile of ``environment`` on disk, as the scripts' ``--recording`` and ``--profile``."""
    folder = tmp_path_factory.mktemp("replay")
    environment.recording.save(folder / "recording")
    environment.profile.save(folder / "profile.json")
    return ["--recording", str(folder / "recording"), "--profile", str(folder / "profile.json")]


def run_script(module, argv: list[str], monkeypatch, capsys) -> str:
    """The parser's error of ``module.main()`` run with ``argv`` (it must stop with exit status 2)."""
    monkeypatch.setattr("sys.argv", [f"{module.__name__}.py", *argv])
    with pytest.raises(SystemExit) as exit_info:
        module.main()
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("script", ["replay_oracle", "replay_score_ceiling"])
@pytest.mark.parametrize("static", ["2,4,3", "3,2,3", "2,2"])
def test_a_static_tree_the_recording_does_not_replay_is_refused_naming_those_it_does(
    oracle, score_ceiling, saved, script, static, monkeypatch, capsys
):
    """The recording's top_k is 2: the ceiling compared top_k 4's '2,4,3' as its top_k 2 tree under that name; a shape
    outside the replayed ones (3,2,3 reaches depth 2 only) stopped in a KeyError or '... is not in list'."""
    module = {"replay_oracle": oracle, "replay_score_ceiling": score_ceiling}[script]
    err = run_script(module, [*saved, "--static", static], monkeypatch, capsys)
    if static == "2,2":
        assert "--static takes DEPTH,TOP_K,TOTAL_TOKENS (e.g. 1,8,8), got '2,2'" in err
    else:
        assert f"--static {static} is not among the shapes this recording replays" in err and "2,2,3" in err


@pytest.mark.parametrize("argv", [["--folds", "1"], ["--after-level", "4"], ["--after-level", "-1"]])
def test_the_score_ceiling_refuses_one_fold_and_levels_the_recording_never_drafted(
    score_ceiling, saved, argv, monkeypatch, capsys
):
    """One fold fitted on no prompt (NaN predictions: every choice the plain step, printed as a gain); levels past
    the recording's 3 were charged though never drafted."""
    err = run_script(score_ceiling, [*saved, "--static", "2,2,3", *argv], monkeypatch, capsys)
    assert f"error: {' '.join(argv)}: " in err


@pytest.mark.parametrize("argv", [["--nodes", "0"], ["--nodes", "-3"], ["--folds", "1"]])
def test_tree_selection_refuses_no_nodes_and_one_fold(saved, argv, monkeypatch, capsys):
    """``--nodes 0`` verified a budget of -1 nodes, which sliced the ranked nodes from the end: a higher τ than any
    budget, printed as 'verifying 0 nodes'; one fold stopped in an IndexError."""
    err = run_script(load_example("replay_tree_selection"), saved[:2] + argv, monkeypatch, capsys)
    assert f"{' '.join(argv)}: give at least" in err
