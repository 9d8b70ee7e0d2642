"""Training stages sized in wall time: the schedule runs over the budget and training stops at its end."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

import pytest
import torch
from tiny_models import make_char_tokenizer, tiny_model
from transformers import TrainerCallback, TrainerState

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import Eagle3Config, Eagle3Trainer, build_draft_vocabulary, collate
from hf_adaptive_spec.training.eagle3.curve import read_curve
from hf_adaptive_spec.training.time_budget import (
    TimeBudgetCallback,
    decay_start_step,
    schedule_factor,
    stable_point_callback,
    time_budget,
)

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


def _trainer(
    tmp_path, budget: TimeBudgetCallback, clock: _Clock, scheduler: str = "cosine", **kwargs
) -> Eagle3Trainer:
    target = tiny_model("llama")
    samples = _samples(target, count=4, length=20)
    torch.manual_seed(0)
    draft = Eagle3DraftModel.from_target(
        target, draft_to_target=build_draft_vocabulary(samples, 16, target.config.vocab_size)
    )
    args = Eagle3Config(
        output_dir=str(tmp_path), max_steps=100, per_device_train_batch_size=2, learning_rate=1e-3, ttt_steps=2,
        lr_scheduler_type=scheduler, warmup_ratio=0.25, logging_steps=1, report_to=[], seed=0, disable_tqdm=True,
        **{"save_strategy": "no", **kwargs},
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


def _rates(trainer: Eagle3Trainer, after: int = 0) -> list[float]:
    return [entry["learning_rate"] for entry in trainer.state.log_history
            if "learning_rate" in entry and entry["step"] > after]


def test_a_resumed_timed_run_continues_its_budget_and_schedule(tmp_path):
    """The budget's seconds spent are kept in the checkpoint: resumed from checkpoint-4, the run went on at the rate
    of step 5 and stopped where the uninterrupted run did (the budget and its warm-up had started again, from 0)."""
    clock = _Clock(step_seconds=7.5)  # 8 steps fill a one-minute budget
    whole = _trainer(tmp_path / "a", TimeBudgetCallback(1.0, clock=clock), clock, save_strategy="steps", save_steps=4)
    whole.train()
    clock = _Clock(step_seconds=7.5)  # another process's clock: its readings start elsewhere
    clock.now = 5000.0
    resumed = _trainer(tmp_path / "b", TimeBudgetCallback(1.0, clock=clock), clock)
    resumed.train(resume_from_checkpoint=str(tmp_path / "a" / "checkpoint-4"))
    assert resumed.state.global_step == 8
    assert _rates(resumed, after=4) == pytest.approx(_rates(whole, after=4), abs=1e-9)
    state = json.loads((tmp_path / "a" / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["stateful_callbacks"]["TimeBudgetCallback"]["attributes"]["seconds_spent"] == pytest.approx(30.0)


def test_resuming_a_spent_budget_or_restoring_the_budget_from_the_checkpoint_is_refused(tmp_path):
    """A checkpoint that spent the whole budget has nothing left to train: refused before anything loads, naming
    the fix; a larger budget continues at the share spent."""
    checkpoint = tmp_path / "checkpoint-8"
    checkpoint.mkdir()
    spent = TimeBudgetCallback(1.0)
    spent.spent = 1.0
    TrainerState(global_step=8, stateful_callbacks=[spent]).save_to_json(str(checkpoint / "trainer_state.json"))
    with pytest.raises(ValueError, match=r"spent 1 minutes of its time budget, all of max_train_minutes=1: .* Raise "
                                         "max_train_minutes to train on"):
        time_budget(1.0, None, _args("cosine", resume_from_checkpoint=str(checkpoint)))
    assert time_budget(2.0, None, _args("cosine", resume_from_checkpoint=str(checkpoint))) is not None
    with pytest.raises(ValueError, match="Leave restore_callback_states_from_checkpoint off"):
        time_budget(1.0, None, _args("cosine", restore_callback_states_from_checkpoint=True))


WSD = "warmup_stable_decay"


def test_warmup_stable_decay_holds_the_peak_and_decays_over_its_share_only():
    assert schedule_factor(WSD, 0.05, warmup=0.1, decay_ratio=0.2) == pytest.approx(0.5)
    assert schedule_factor(WSD, 0.5, warmup=0.1, decay_ratio=0.2) == 1.0
    assert schedule_factor(WSD, 0.79, warmup=0.1, decay_ratio=0.2) == 1.0  # cosine would be at 0.24 by now
    assert schedule_factor(WSD, 0.9, warmup=0.1, decay_ratio=0.2) == pytest.approx(0.5)
    assert schedule_factor(WSD, 1.0, warmup=0.1, decay_ratio=0.2) == pytest.approx(0.0)


def _train_with_stable_point(tmp_path, budget: TimeBudgetCallback, clock: _Clock) -> tuple[int, list[float], list[int]]:
    """Train a timed warmup_stable_decay run; its steps, the rate each step ran at, the steps its stable point saved
    after."""
    trainer = _trainer(tmp_path, budget, clock, scheduler=WSD, lr_scheduler_kwargs={"num_decay_steps": 0})
    saved = []
    trainer.add_callback(stable_point_callback(trainer.args, budget, lambda: saved.append(trainer.state.global_step)))
    trainer.train()
    rates = [entry["learning_rate"] for entry in trainer.state.log_history if "learning_rate" in entry]
    return trainer.state.global_step, rates, saved


def test_a_warmup_stable_decay_budget_saves_its_stable_point_once_as_the_decay_begins(tmp_path):
    clock = _Clock(step_seconds=7.5)  # 8 steps fill the budget; its decay, the last quarter, begins after step 6
    steps, rates, saved = _train_with_stable_point(tmp_path, TimeBudgetCallback(1.0, clock=clock, decay_ratio=0.25),
                                                   clock)
    assert steps == 8
    assert rates == pytest.approx([0.0, 5e-4, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 5e-4], abs=1e-9)
    assert saved == [6]  # after the last step at the peak, once


def test_no_stable_point_for_the_other_schedules():
    budget = TimeBudgetCallback(1.0)
    assert stable_point_callback(Eagle3Config(output_dir="unused", lr_scheduler_type="cosine"), budget, print) is None


def _args(scheduler: str = WSD, warmup: float = 0.0, **kwargs) -> Eagle3Config:
    return Eagle3Config(output_dir="unused", lr_scheduler_type=scheduler, warmup_ratio=warmup, report_to=[], **kwargs)


def test_a_time_budget_refuses_what_it_would_ignore_and_a_decay_that_does_not_fit():
    with pytest.raises(ValueError, match="max_train_minutes is not set"):
        time_budget(None, 0.2, _args())
    with pytest.raises(ValueError, match="would ignore lr_scheduler_kwargs"):
        time_budget(5, None, _args("cosine", lr_scheduler_kwargs={"num_cycles": 1}))
    for decay, scheduler in [(None, WSD), (0.2, "cosine")]:
        with pytest.raises(ValueError, match="Set both or neither"):
            time_budget(5, decay, _args(scheduler))
    with pytest.raises(ValueError, match="add up to more than the budget"):
        time_budget(5, 0.9, _args(warmup=0.2))
    with pytest.raises(ValueError, match="needs lr_scheduler_kwargs='\\{\"num_decay_steps\""):
        time_budget(None, None, _args())
    with pytest.raises(ValueError, match="start decaying at step 1, inside its 2 warm-up steps"):
        time_budget(None, None, _args(warmup=0.2, max_steps=10, lr_scheduler_kwargs={"num_decay_steps": 9}))
    with pytest.raises(ValueError, match="counts the warm-up in steps, which a time budget cannot"):
        time_budget(5, None, _args("cosine", warmup=0.0, warmup_steps=10))
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        TimeBudgetCallback(1.0, decay_ratio=0)
    assert time_budget(None, None, _args("cosine")) is None
    with pytest.raises(ValueError, match="must be positive, got 0 minutes"):  # was read as no budget (a review)
        time_budget(0, None, _args("cosine"))
    assert time_budget(5, 1.0, _args()).decay_ratio == 1.0  # all decay: a cosine over the budget
    assert time_budget(5, 0.8, _args(warmup=0.2)).decay_ratio == 0.8  # warm-up and decay may fill the budget
    args = _args()
    assert time_budget(5, 0.2, args).decay_ratio == 0.2
    assert args.lr_scheduler_kwargs == {"num_decay_steps": 0}  # what transformers needs to build the step schedule
    # a budgeted run's training_config.json stores that placeholder: the same settings given back are accepted
    stored = json.loads(args.to_json_string())
    again = Eagle3Config(**{k: v for k, v in stored.items() if k in ("output_dir", "lr_scheduler_type",
                                                                         "lr_scheduler_kwargs", "report_to")})
    assert time_budget(5, 0.2, again).decay_ratio == 0.2
    with pytest.raises(ValueError, match="would ignore lr_scheduler_kwargs"):
        time_budget(5, 0.2, _args(lr_scheduler_kwargs={"num_decay_steps": 3}))
    with pytest.raises(ValueError, match="would ignore lr_scheduler_kwargs"):
        time_budget(5, None, _args("cosine", lr_scheduler_kwargs={"num_decay_steps": 0}))
    with pytest.raises(ValueError, match="num_decay_steps=0 never decays"):  # the stored placeholder without a budget
        time_budget(None, None, again)


def _stage(tmp_path, monkeypatch, name: str, **settings):
    """One run of the EAGLE-3 script on a tiny target: 8 conversations, and 4 others held out."""
    import hf_adaptive_spec.training.eagle3.script as script

    tokenizer = make_char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'][0] + ',' + m['content'] + '.' }}{% endfor %}"
    torch.manual_seed(0)
    target = tiny_model("llama")
    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model", lambda name, dtype: (target, tokenizer))
    data = tmp_path / "data.jsonl"
    turns = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a {i} b {i}"}]
             for i in range(12)]
    data.write_text("".join(json.dumps({"conversation": t}) + "\n" for t in turns[:8]), encoding="utf-8")
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text("".join(json.dumps({"conversation": t}) + "\n" for t in turns[8:]), encoding="utf-8")
    script_settings = {k: settings.pop(k) for k in ("init_from", "max_train_minutes", "decay_ratio") if k in settings}
    args = script.Eagle3Config(output_dir=str(tmp_path / name), per_device_train_batch_size=2, ttt_steps=2,
                               draft_vocab_size=8, max_length=32, save_strategy="no", report_to=[], disable_tqdm=True,
                               learning_rate=1e-2, **settings)
    training_logger = logging.getLogger("hf_adaptive_spec.training")
    level = training_logger.level
    script.main(script.Eagle3ScriptArguments(dataset_path=str(data), heldout_path=str(held_out),
                                             heldout_conversations=4, heldout_every_steps=100, **script_settings),
                args)
    assert training_logger.level == level  # the curve's points were shown for the run only
    return tmp_path / name


def test_a_stage_resumes_from_the_stable_point_a_step_counted_warmup_stable_decay_run_saved(tmp_path, monkeypatch):
    out = _stage(tmp_path, monkeypatch, "first", max_steps=6, lr_scheduler_type=WSD,
                 lr_scheduler_kwargs={"num_decay_steps": 2})
    stable = out / "stable"
    assert [p.step for p in read_curve(stable)] == [0, 4]  # a held-out point at the stable point itself
    assert [p.step for p in read_curve(out)] == [0, 4, 6]
    assert "stable point" in (stable / "README.md").read_text()
    assert "stable point" not in (out / "README.md").read_text()
    at_stable = Eagle3DraftModel.from_pretrained(stable, target=tiny_model("llama"))
    at_end = Eagle3DraftModel.from_pretrained(out, target=tiny_model("llama"))
    assert not torch.equal(at_stable.fc.weight, at_end.fc.weight)  # the decay's two steps trained on
    following = _stage(tmp_path, monkeypatch, "next", init_from=str(stable), max_steps=2)
    assert [p.step for p in read_curve(following)] == [0, 4, 6]  # the lineage counts on from the stable point


def test_a_timed_warmup_stable_decay_run_that_ends_before_its_decay_saves_no_stable_point(tmp_path, monkeypatch):
    out = _stage(tmp_path, monkeypatch, "timed", max_steps=2, lr_scheduler_type=WSD, max_train_minutes=30,
                 decay_ratio=0.2)
    assert (out / "config.json").is_file() and not (out / "stable").exists()
    assert json.loads((out / "training_config.json").read_text())["lr_scheduler_kwargs"] == {"num_decay_steps": 0}


def test_the_step_counted_decay_starts_where_transformers_schedule_does():
    from transformers.optimization import get_wsd_schedule

    for kwargs in ({"num_decay_steps": 3}, {"num_decay_steps": 3, "num_stable_steps": 4}):
        args = _args(warmup=0.2, max_steps=10, lr_scheduler_kwargs=kwargs)
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        warmup = args.get_warmup_steps(10)
        schedule = get_wsd_schedule(optimizer, num_warmup_steps=warmup, num_training_steps=10, **kwargs)
        factors = [schedule.lr_lambdas[0](step) for step in range(10)]
        start = decay_start_step(args, 10)
        assert factors[start - 1] == factors[start] == 1.0 and factors[start + 1] < 1.0, (kwargs, factors)


def test_a_run_resumed_past_its_decay_keeps_the_stable_point_it_saved():
    saved = []
    callback = stable_point_callback(_args(max_steps=10, lr_scheduler_kwargs={"num_decay_steps": 3}), None,
                                     lambda: saved.append(True))
    state = TrainerState(global_step=8, max_steps=10)  # resumed from checkpoint-8; the decay began at step 7
    callback.on_train_begin(None, state, None)
    state.global_step = 9
    callback.on_step_end(None, state, None)
    assert saved == []


def test_warmup_ratio_warms_up_a_run_counted_in_steps():
    """transformers 5 reads warmup_steps alone: a ratio left in warmup_ratio did not warm up at all."""
    from hf_adaptive_spec.training.ppow import PPOWConfig

    for config in (Eagle3Config, PPOWConfig):
        assert config(output_dir="unused", warmup_ratio=0.25, report_to=[]).get_warmup_steps(100) == 25
        assert config(output_dir="unused", warmup_ratio=0.0, warmup_steps=7, report_to=[]).get_warmup_steps(100) == 7
        with pytest.raises(ValueError, match="both set the warm-up"):
            config(output_dir="unused", warmup_ratio=0.25, warmup_steps=7, report_to=[])
        with pytest.raises(ValueError, match=r"in \[0, 1\)"):
            config(output_dir="unused", warmup_ratio=1.5, report_to=[])


_RANK = """
import json, sys
from datetime import timedelta
from types import SimpleNamespace
import torch, torch.distributed as dist
from transformers import TrainerControl
from hf_adaptive_spec.training.time_budget import TimeBudgetCallback
rank, rendezvous, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=2,
                        timeout=timedelta(seconds=60))
now = [100.0]
budget = TimeBudgetCallback(1.0, clock=lambda: now[0], decay_ratio=0.25)
budget.start = 100.0
args, steps = SimpleNamespace(device=torch.device("cpu"), world_size=2), []
# rank 1's clock runs ahead of rank 0's: at the first step it says the 60 s are spent (alone it would stop there),
# rank 0's says half are
for seconds in ((30.0, 60.5), (61.0, 61.5)):
    now[0] = 100.0 + seconds[rank]
    control = TrainerControl()
    budget.on_optimizer_step(args, None, control)
    budget.on_step_end(args, None, control)
    steps.append([budget.spent, budget.decaying(), control.should_training_stop])
json.dump(steps, open(out, "w"))
dist.destroy_process_group()
"""


def test_the_processes_of_a_distributed_run_share_the_main_process_budget_reading(tmp_path):
    """Each process reading its own clock would set its own rate (the replicas drift apart) and stop on its own step
    (the others then wait in a collective forever): every process takes rank 0's reading."""
    import subprocess
    import sys

    outputs = [tmp_path / f"rank{rank}.json" for rank in range(2)]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), *sys.path])}
    ranks = [subprocess.Popen([sys.executable, "-c", _RANK, str(rank), str(tmp_path / "rendezvous"), str(out)],
                              env=environment, stderr=subprocess.PIPE, text=True)
             for rank, out in enumerate(outputs)]
    try:
        errors = [process.communicate(timeout=120)[1] for process in ranks]
    finally:
        for process in ranks:
            process.kill()
    assert [process.returncode for process in ranks] == [0, 0], errors
    steps = [json.loads(out.read_text()) for out in outputs]
    assert steps[0] == steps[1] == [[0.5, False, False], [1.0, True, True]]


def test_the_rate_the_stop_and_the_decay_read_the_step_reading_the_processes_agreed_on(tmp_path):
    clock = _Clock(step_seconds=7.5)  # this process's clock alone would run 8 steps
    agreed = iter([0.5, 0.8, 1.0])  # what the main process read at steps 1-3
    budget = TimeBudgetCallback(1.0, clock=clock, decay_ratio=0.25, agree=lambda reading, args: next(agreed))
    steps, rates, saved = _train_with_stable_point(tmp_path, budget, clock)
    assert steps == 3
    # step k runs at the rate set from step k - 1's agreed reading (the first at the warm-up's start)
    assert rates == pytest.approx([0.0, 1e-3, 1e-3 * schedule_factor(WSD, 0.8, 0.25, 0.25)], abs=1e-9)
    assert saved == [2]  # step 2's reading, 0.8, is past the decay's start (0.75)
