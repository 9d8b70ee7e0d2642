"""Training stages sized in wall time: the configured learning-rate schedule, run over a time budget.

A stage that must fit a working block or a lent accelerator is known in minutes, not steps, and the
steps a minute buys differ by machine (about 11 s a step on two CPU cores, a fraction of a second on
a GPU). :class:`TimeBudgetCallback` makes the schedule's progress the share of the budget spent, so
the rate has warmed up and decayed to zero whenever the budget ends; training then stops and the
trainer saves as it does at ``max_steps``.

A stage that a later stage resumes from should not end annealed: each restart from a decayed drafter paid a
dip (stage 15 started at 0.585 held-out acceptance, was at 0.571 50 steps into the restart at the peak rate, and back
above its start only at the next point, step 100 of 261; stage 18, on a CPU, never got back in its 199). With
``warmup_stable_decay`` the rate holds its peak and decays only over the last ``decay_ratio`` of the budget;
:class:`StablePointCallback` saves the run once as the decay begins, the point a next stage resumes from, while the
decayed end is the drafter to ship.

A run resumed from a checkpoint continues its budget: the seconds it had spent are kept in the checkpoint's
``trainer_state.json`` (as :class:`~.spec_trainer.SamplesDrawn` keeps its count), so the schedule goes on where it
was and only the rest of the budget is spent.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable

import torch
from torch.optim.lr_scheduler import LambdaLR
from transformers import TrainerCallback, TrainerState, TrainingArguments
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_callback import ExportableState

from .resume import resolve_checkpoint
from .warmup import warmup_share

logger = logging.getLogger(__name__)

TIME_SCHEDULES = ("constant", "linear", "cosine", "warmup_stable_decay")
#: what a time budget gives transformers to build its step-counted ``warmup_stable_decay`` schedule, which the budget
#: then replaces; a budgeted run's ``training_config.json`` stores it, so a budget accepts it back
BUDGET_WSD_KWARGS = {"num_decay_steps": 0}


def schedule_factor(shape: str, progress: float, warmup: float, decay_ratio: float | None = None) -> float:
    """Multiplier of the peak rate at ``progress`` (0..1) of a schedule with ``warmup`` share of warm-up.

    ``linear`` and ``cosine`` decay over everything after the warm-up; ``warmup_stable_decay`` holds the peak and
    decays (cosine) over the last ``decay_ratio`` of the progress only.
    """
    if progress < warmup:
        return progress / warmup
    if shape == "constant":
        return 1.0
    start = warmup
    if shape == "warmup_stable_decay":
        start = 1.0 - decay_ratio
        if progress < start:
            return 1.0
    decay = min(1.0, (progress - start) / max(1.0 - start, 1e-9))
    if shape == "linear":
        return 1.0 - decay
    return 0.5 * (1.0 + math.cos(math.pi * decay))


def scheduler_shape(args) -> str:
    """``args.lr_scheduler_type`` as a plain string (it may be a ``SchedulerType``)."""
    return str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type))


class TimeBudgetCallback(TrainerCallback, ExportableState):
    """Stops training after ``minutes`` of wall time, with the learning-rate schedule run over that time.

    The trainer's own schedule (``lr_scheduler_type`` ``constant``, ``linear``, ``cosine`` or ``warmup_stable_decay``
    with ``warmup_ratio``) keeps its shape, but its clock becomes the budget: ``max_steps`` still ends a
    run that reaches it first, at whatever rate the clock has reached then.

    The seconds spent are kept in each checkpoint's ``trainer_state.json``; a run resumed from it continues from them
    (:meth:`seconds_spent_at`), its schedule where it was, and a resume given another ``minutes`` continues at the share
    of the new budget those seconds are, with a warning. A checkpoint saved without them (a run counted in steps, or
    one saved before budgets were kept) starts the budget and its schedule again at its step, with a warning.

    The budget's clock is read once per optimizer step, and in a run of several processes the main process's reading
    is the one every process uses (:func:`main_process_value`): each reads its own clock otherwise, so the processes
    would step at different rates, their replicas drifting apart, and stop at different steps, one of them then
    waiting for the others in a collective that never comes.

    Args:
        minutes: wall-time budget of the training loop (loading and the final save are outside it).
        clock: seconds, monotonic; injectable for tests.
        decay_ratio: with ``warmup_stable_decay`` (and only then), the share of the budget the rate decays over.
        agree: how the processes agree on the step's reading (``(reading, args) -> reading``); injectable for tests.
    """

    def __init__(
        self,
        minutes: float,
        clock: Callable[[], float] = time.monotonic,
        decay_ratio: float | None = None,
        agree: Callable[[float, TrainingArguments], float] | None = None,
    ):
        if not minutes > 0:
            raise ValueError(
                f"A time budget must be positive, got {minutes} minutes: leave max_train_minutes unset for a run "
                "counted in steps."
            )
        if decay_ratio is not None and not 0 < decay_ratio <= 1:
            raise ValueError(f"decay_ratio is a share of the time budget, in (0, 1]; got {decay_ratio}.")
        self.seconds = 60.0 * minutes
        self.clock = clock
        self.decay_ratio = decay_ratio
        self.agree = agree or main_process_value
        self.start: float | None = None
        self.spent = 0.0  # share of the budget spent, as of the current optimizer step, the same on every process

    def progress(self) -> float:
        """Share of the budget this process's clock says is spent (0 before training starts)."""
        return 0.0 if self.start is None else min(1.0, (self.clock() - self.start) / self.seconds)

    def state(self) -> dict:
        """What a checkpoint keeps of the budget: its size and the seconds spent as of the last optimizer step."""
        return {"args": {"minutes": self.seconds / 60.0, "decay_ratio": self.decay_ratio},
                "attributes": {"seconds_spent": self.spent * self.seconds}}

    def seconds_spent_at(self, state: TrainerState) -> float:
        """Seconds of the budget a run had spent at ``state``: 0 for a new run or a checkpoint that kept none, the
        checkpoint's for a resumed run; refused when they fill this budget (nothing would be left to train)."""
        stored = state.stateful_callbacks.get(type(self).__name__) if state.global_step else None
        if not stored:
            return 0.0
        seconds = stored["attributes"]["seconds_spent"]
        if seconds >= self.seconds:
            raise ValueError(
                f"The checkpoint at step {state.global_step} had spent {seconds / 60:.4g} minutes of its time budget, "
                f"all of max_train_minutes={self.seconds / 60:.4g}: a resumed run would have no time left to train. "
                "Raise max_train_minutes to train on (the schedule continues at the share of it already spent)."
            )
        return seconds

    def _warn_of_resumed_budget(self, state: TrainerState) -> None:
        """Warn where a resumed run's budget starts again (its checkpoint kept none) or was resized."""
        stored = state.stateful_callbacks.get(type(self).__name__)
        if not state.global_step:
            return
        if not stored:
            logger.warning(
                "The checkpoint at step %d kept no time budget (a run counted in steps, or saved before budgets were "
                "kept): the budget of max_train_minutes=%.4g, and its schedule from the warm-up, start again here.",
                state.global_step, self.seconds / 60,
            )
        elif stored["args"]["minutes"] != self.seconds / 60:
            seconds = stored["attributes"]["seconds_spent"]
            logger.warning(
                "Resumed with max_train_minutes=%.4g where the checkpoint's run had %.4g: its %.4g minutes spent are "
                "%.3g%% of the new budget, where the schedule continues.",
                self.seconds / 60, stored["args"]["minutes"], seconds / 60, 100 * seconds / self.seconds,
            )

    def decaying(self, _state=None) -> bool:
        """Whether a ``warmup_stable_decay`` schedule has begun to decay (never for the other shapes)."""
        return self.start is not None and self.decay_ratio is not None and self.spent >= 1.0 - self.decay_ratio

    def on_train_begin(self, args, state, control, lr_scheduler=None, **kwargs):
        shape, warmup = self.check_schedule(args)
        scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate may wrap it
        if not isinstance(scheduler, LambdaLR):
            raise TypeError(
                f"A time budget needs the trainer's LambdaLR schedule, got {type(scheduler).__name__}: pass no "
                "optimizers=(..., scheduler) to the trainer, or drop the budget."
            )
        spent_before = self.seconds_spent_at(state)
        self._warn_of_resumed_budget(state)
        self.start, self.spent = self.clock() - spent_before, spent_before / self.seconds
        state.stateful_callbacks[type(self).__name__] = self.state()  # where Trainer updates it at each save

        def by_time(_step: int) -> float:
            return schedule_factor(shape, self.spent, warmup, self.decay_ratio)

        scheduler.lr_lambdas = [by_time] * len(scheduler.lr_lambdas)
        for group, base in zip(scheduler.optimizer.param_groups, scheduler.base_lrs):
            group["lr"] = base * by_time(0)
        scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]

    def check_schedule(self, args: TrainingArguments) -> tuple[str, float]:
        """``args``' schedule shape and warm-up share; a schedule the budget cannot run, or a decay share that does not
        fit it, is refused."""
        shape, warmup = scheduler_shape(args), warmup_share(args)
        if shape not in TIME_SCHEDULES:
            raise ValueError(
                f"A time budget runs the schedule over time, which it can for {', '.join(TIME_SCHEDULES)}; "
                f"lr_scheduler_type={shape!r} is not one of them. Set one of those, or drop the time budget."
            )
        if (shape == "warmup_stable_decay") != (self.decay_ratio is not None):
            raise ValueError(
                f"lr_scheduler_type={shape!r} with decay_ratio={self.decay_ratio}: under a time budget, "
                "warmup_stable_decay needs decay_ratio (the share of the budget the rate decays over, e.g. 0.2) and "
                "the other schedules take none. Set both or neither."
            )
        if self.decay_ratio is not None and warmup + self.decay_ratio > 1:
            raise ValueError(
                f"warmup_ratio={warmup} and decay_ratio={self.decay_ratio} add up to more than the budget; "
                "lower one of them."
            )
        return shape, warmup

    def on_optimizer_step(self, args, state, control, **kwargs):
        # read once per step, before the scheduler's step sets the next rate from it (under DeepSpeed the engine
        # steps the scheduler inside backward, so the rate follows the reading one step later, on every rank alike)
        self.spent = self.agree(self.progress(), args)

    def on_step_end(self, args, state, control, **kwargs):
        if self.spent >= 1.0:
            control.should_training_stop = True
        return control


def main_process_value(value: float, args: TrainingArguments) -> float:
    """``value`` as the main process (rank 0) has it, on every process of a distributed run (a broadcast on
    ``args.device``, which NCCL needs to be the process's accelerator); ``value`` itself in a run of one process."""
    if args.world_size <= 1 or not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return value
    shared = torch.tensor([value], dtype=torch.float32, device=args.device)  # float64: not on every backend
    torch.distributed.broadcast(shared, src=0)
    return float(shared.item())


def time_budget(minutes: float | None, decay_ratio: float | None, args: TrainingArguments) -> TimeBudgetCallback | None:
    """The run's :class:`TimeBudgetCallback` (None without ``minutes``, the schedule then counted in steps and
    checked as such), refusing what the budget would ignore.

    Under a budget the schedule is the budget's, so ``lr_scheduler_kwargs`` are refused; ``warmup_stable_decay``
    gets the ``num_decay_steps`` transformers needs to build its step schedule (``BUDGET_WSD_KWARGS``), which the
    budget then replaces, and which a budgeted run's stored ``training_config.json`` may give back.
    """
    if minutes is None:
        if decay_ratio is not None:
            raise ValueError(
                f"decay_ratio={decay_ratio} shares out a time budget, and max_train_minutes is not set. Set it, or for "
                "a run counted in steps give warmup_stable_decay "
                "lr_scheduler_kwargs='{\"num_decay_steps\": N}' instead."
            )
        check_step_counted_decay(args)
        return None
    own_placeholder = scheduler_shape(args) == "warmup_stable_decay" and args.lr_scheduler_kwargs == BUDGET_WSD_KWARGS
    if args.lr_scheduler_kwargs and not own_placeholder:
        raise ValueError(
            f"A time budget (max_train_minutes={minutes}) runs its own schedule over time and would ignore "
            f"lr_scheduler_kwargs={args.lr_scheduler_kwargs}. Drop them (warmup_stable_decay's decay is decay_ratio "
            "under a budget), or drop the budget."
        )
    if args.restore_callback_states_from_checkpoint:
        raise ValueError(
            f"A time budget (max_train_minutes={minutes}) continues from the time its checkpoint spent by itself, and "
            "restore_callback_states_from_checkpoint would replace it by a copy the run's stable point does not "
            "follow. Leave restore_callback_states_from_checkpoint off."
        )
    budget = TimeBudgetCallback(minutes, decay_ratio=decay_ratio)
    if budget.check_schedule(args)[0] == "warmup_stable_decay":
        args.lr_scheduler_kwargs = dict(BUDGET_WSD_KWARGS)
    check_budget_left(budget, args)
    return budget


def check_budget_left(budget: TimeBudgetCallback, args: TrainingArguments) -> None:
    """Before anything loads, refuse to resume ``args.resume_from_checkpoint`` when its run spent all of ``budget``
    (:meth:`TimeBudgetCallback.seconds_spent_at`, read from the checkpoint's ``trainer_state.json``)."""
    if not args.resume_from_checkpoint:
        return
    path = os.path.join(resolve_checkpoint(args.resume_from_checkpoint, args.output_dir), TRAINER_STATE_NAME)
    if os.path.isfile(path):
        budget.seconds_spent_at(TrainerState.load_from_json(path))


def check_step_counted_decay(args: TrainingArguments) -> None:
    """Refuse a step-counted ``warmup_stable_decay`` schedule transformers cannot build, or whose decay would begin
    inside its warm-up (a negative stable phase)."""
    if scheduler_shape(args) != "warmup_stable_decay":
        return
    if "num_decay_steps" not in (args.lr_scheduler_kwargs or {}):
        raise ValueError(
            "lr_scheduler_type='warmup_stable_decay' counted in steps needs lr_scheduler_kwargs='{\"num_decay_steps\": "
            "N}' (transformers' get_wsd_schedule); under a time budget (max_train_minutes) set decay_ratio instead."
        )
    if not args.lr_scheduler_kwargs["num_decay_steps"] > 0:
        raise ValueError(
            f"warmup_stable_decay with num_decay_steps={args.lr_scheduler_kwargs['num_decay_steps']} never decays: "
            f"{BUDGET_WSD_KWARGS} is what a time budget stores in training_config.json, so give max_train_minutes and "
            "decay_ratio back with it; counted in steps, set a positive num_decay_steps."
        )
    if args.max_steps <= 0:
        return
    start, warmup = decay_start_step(args, args.max_steps), args.get_warmup_steps(args.max_steps)
    if start < warmup:
        raise ValueError(
            f"warmup_stable_decay over max_steps={args.max_steps} would start decaying at step {start}, inside its "
            f"{warmup} warm-up steps: lower num_decay_steps or the warm-up, or raise max_steps."
        )


def decay_start_step(args: TrainingArguments, max_steps: int) -> int:
    """The optimizer step at which a step-counted ``warmup_stable_decay`` schedule (transformers' ``get_wsd_schedule``,
    over ``max_steps``) starts to decay."""
    kwargs = args.lr_scheduler_kwargs or {}
    if kwargs.get("num_stable_steps") is not None:
        return args.get_warmup_steps(max_steps) + kwargs["num_stable_steps"]
    return max_steps - kwargs["num_decay_steps"]


class StablePointCallback(TrainerCallback):
    """Calls ``save`` once, after the first optimizer step at which ``decaying(state)`` holds: the weights at the end
    of a ``warmup_stable_decay`` schedule's stable phase, which a next stage resumes from instead of the decayed end.
    Nothing is saved when the run ends before its decay begins (its last weights are then at the peak rate), nor by a
    run resumed from a checkpoint past it (a timed run's continues its budget, :class:`TimeBudgetCallback`)."""

    def __init__(self, decaying: Callable[[TrainerState], bool], save: Callable[[], None]):
        self.decaying, self.save = decaying, save
        self.saved = False

    def on_train_begin(self, args, state, control, **kwargs):
        # a run resumed past its decay's start saved its stable point before: decayed weights must not replace it
        self.saved = self.decaying(state)

    def on_step_end(self, args, state, control, **kwargs):
        if not self.saved and self.decaying(state):
            self.saved = True
            self.save()


def stable_point_callback(
    args: TrainingArguments, budget: TimeBudgetCallback | None, save: Callable[[], None]
) -> StablePointCallback | None:
    """A :class:`StablePointCallback` for a ``warmup_stable_decay`` run (timed by ``budget`` or counted in steps), or
    None for the other schedules."""
    if scheduler_shape(args) != "warmup_stable_decay":
        return None
    if budget is not None:
        return StablePointCallback(budget.decaying, save)
    return StablePointCallback(lambda state: state.global_step >= decay_start_step(args, state.max_steps), save)
