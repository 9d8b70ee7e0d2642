"""Training stages sized in wall time: the schedule runs over the budget and training stops at its end."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_models import tiny_model
from transformers import TrainerCallback

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import Eagle3Config, Eagle3Trainer, build_draft_vocabulary, collate
from hf_adaptive_spec.training.time_budget import TimeBudgetCallback, schedule_factor

from .test_eagle3_training import _samples

torch.set_num_threads(1)


def test_schedule_factor_warms_up_then_decays_to_zero():
    assert schedule_factor("cosine", 0.05, warmup=0.1) == pytest.approx(0.5)
    assert schedule_factor("cosine", 0.1, warmup=0.1) == pytest.approx(1.0)
    assert schedule_factor("cosine", 0.55, warmup=0.1) == pytest.approx(0.5)
    assert schedule_factor("cosine", 1.0, warmup=0.1) == pytest.approx(0.0)
    assert schedule_factor("linear", 0.55, warmup=0.1) == pytest.approx(0.5)
    assert schedule_factor("constant", 0.9, warmup=0.1) == 1.0
    assert schedule_factor("cosine", 0.5, warmup=0.0) == pytest.approx(0.5)


class _Clock:
    """A clock that moves ``step_seconds`` at the start of every optimizer step."""

    def __init__(self, step_seconds: float):
        self.now, self.step_seconds = 1000.0, step_seconds

    def __call__(self) -> float:
        return self.now


class _Tick(TrainerCallback):
    def __init__(self, clock: _Clock):
        self.clock = clock

    def on_step_begin(self, args, state, control, **kwargs):
        self.clock.now += self.clock.step_seconds


def _trainer(tmp_path, budget: TimeBudgetCallback, clock: _Clock, scheduler: str = "cosine") -> Eagle3Trainer:
    target = tiny_model("llama")
    samples = _samples(target, count=4, length=20)
    torch.manual_seed(0)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=build_draft_vocabulary(samples, 16, target.config.vocab_size))
    args = Eagle3Config(
        output_dir=str(tmp_path), max_steps=100, per_device_train_batch_size=2, learning_rate=1e-3, ttt_steps=2,
        lr_scheduler_type=scheduler, warmup_ratio=0.25, logging_steps=1, save_strategy="no", report_to=[],
        seed=0, disable_tqdm=True,
    )
    return Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                         data_collator=lambda b: collate(b, pad_token_id=0), callbacks=[_Tick(clock), budget])


def test_training_stops_at_the_budget_with_the_schedule_run_over_time(tmp_path):
    clock = _Clock(step_seconds=7.5)  # 8 steps fill a one-minute budget
    trainer = _trainer(tmp_path, TimeBudgetCallback(1.0, clock=clock), clock)
    trainer.train()
    assert trainer.state.global_step == 8  # not max_steps=100
    rates = [entry["learning_rate"] for entry in trainer.state.log_history if "learning_rate" in entry]
    # step k (from 0) ran at the rate set when the clock read k * 7.5 s of the 60 s budget
    expected = [1e-3 * schedule_factor("cosine", 7.5 * k / 60, 0.25) for k in range(8)]
    assert rates == pytest.approx(expected, abs=1e-9)
    assert rates[0] == 0.0 and rates[2] == pytest.approx(1e-3)  # warmed up over the first quarter of the time
    assert rates[-1] < 0.1 * 1e-3  # nearly decayed when the budget ends (0 at its very end)


def test_a_schedule_that_cannot_run_over_time_is_refused(tmp_path):
    clock = _Clock(step_seconds=1.0)
    trainer = _trainer(tmp_path, TimeBudgetCallback(1.0, clock=clock), clock, scheduler="polynomial")
    with pytest.raises(ValueError, match="lr_scheduler_type='polynomial' is not one of them"):
        trainer.train()
    with pytest.raises(ValueError, match="must be positive"):
        TimeBudgetCallback(0)
    assert not math.isnan(schedule_factor("linear", 1.0, warmup=1.0))
