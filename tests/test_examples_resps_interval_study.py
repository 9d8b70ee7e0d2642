"""``examples/resps_interval_study.py`` counts tokens as ``generate`` does (none past a generation's end) and, where it
says so, leaves the policy's time out (the study itself needs a checkpoint the repository lacks: its functions are
tested on synthetic cycles)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from example_scripts import load_example

from hf_adaptive_spec.environments.replay import ReplayedCycle, ReplayResult


@pytest.fixture(scope="module")
def study():
    return load_example("resps_interval_study")


def cycle(accepted: int, remaining: int | None = None, policy_time: float = 0.0) -> ReplayedCycle:
    """One second of drafting and verifying; ``remaining`` tokens left in the generation (a cut last cycle)."""
    return ReplayedCycle(context_length=10, draft_depth=1, verified_tokens=4, accepted_length=accepted, draft_time=0.25,
                         verify_time=0.75, policy_time=policy_time, drafter_accepted_length=accepted,
                         remaining_tokens=remaining)


#: two generations, each ending inside its last cycle's accepted path (3 + 1 and 2 + 2 tokens committed, not 3 + 4
#: and 2 + 3), the policy taking a second per cycle
PROMPTS = [[cycle(2, policy_time=1.0), cycle(3, remaining=1, policy_time=1.0)],
           [cycle(1, policy_time=1.0), cycle(2, remaining=2, policy_time=1.0)]]
TOTALS = [[4.0, 2.0], [4.0, 2.0]]  # per prompt: tokens committed, draft + verify seconds


def test_the_deterministic_speed_counts_the_tokens_committed(study):
    """accepted_length + 1 counted the tokens past each generation's end: 3.5 tokens/s for 2."""
    assert study.deterministic_speed(PROMPTS[0], [0.0, 0.0]) == pytest.approx(2.0)
    assert study.deterministic_speed(PROMPTS[0], [1.0, 0.0]) == pytest.approx(4 / 3)


def test_an_interval_s_prompt_totals_count_the_tokens_committed_without_policy_time(study):
    result = ReplayResult(cycles=PROMPTS)
    probe = SimpleNamespace(policy=SimpleNamespace(decision_interval=None,
                                                   actions=[SimpleNamespace(depth=1, total_tokens=4)]),
                            choices=[], result=None)

    class Trainer:
        def evaluate(self, eval_dataset):
            probe.result = result
            probe.choices.extend([(True, 0)] * len(result.all_cycles))
            return {"eval_tokens_per_second": result.tokens_per_second, "eval_vs_best_static": 1.0}

    per_prompt = study.print_interval(probe, Trainer(), [0, 1], 1, (1.0, 1.0), 1.0, 0.0, 0.0)
    assert per_prompt.tolist() == TOTALS


def test_the_bootstrap_s_plain_baseline_leaves_policy_time_out_as_its_heading_says(study, capsys):
    """Plain steps were charged their measured policy time (and their tokens past the end) under a heading saying
    "policy time excluded": an interval exactly as fast as plain steps read as faster."""
    environment = SimpleNamespace(replay=lambda policy, prompts: ReplayResult(cycles=PROMPTS))
    study.print_bootstrap({1: torch.tensor(TOTALS, dtype=torch.float64)}, environment, [0, 1], [1])
    out = capsys.readouterr().out
    assert "policy time excluded" in out
    assert "/ interval 1: [1.0000, 1.0000]   / plain steps: [1.0000, 1.0000]" in out
