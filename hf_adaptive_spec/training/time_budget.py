"""Training stages sized in wall time: the configured learning-rate schedule, run over a time budget.

A stage that must fit a working block or a lent accelerator is known in minutes, not steps, and the
steps a minute buys differ by machine (about 11 s a step on two CPU cores, a fraction of a second on
a GPU). :class:`TimeBudgetCallback` makes the schedule's progress the share of the budget spent, so
the rate has warmed up and decayed to zero whenever the budget ends; training then stops and the
trainer saves as it does at ``max_steps``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from torch.optim.lr_scheduler import LambdaLR
from transformers import TrainerCallback

TIME_SCHEDULES = ("constant", "linear", "cosine")


def schedule_factor(shape: str, progress: float, warmup: float) -> float:
    """Multiplier of the peak rate at ``progress`` (0..1) of a schedule with ``warmup`` share of warm-up."""
    if progress < warmup:
        return progress / warmup
    if shape == "constant":
        return 1.0
    decay = min(1.0, (progress - warmup) / max(1.0 - warmup, 1e-9))
    if shape == "linear":
        return 1.0 - decay
    return 0.5 * (1.0 + math.cos(math.pi * decay))


class TimeBudgetCallback(TrainerCallback):
    """Stops training after ``minutes`` of wall time, with the learning-rate schedule run over that time.

    The trainer's own schedule (``lr_scheduler_type`` ``constant``, ``linear`` or ``cosine`` with
    ``warmup_ratio``) keeps its shape, but its clock becomes the budget: ``max_steps`` still ends a
    run that reaches it first, at whatever rate the clock has reached then.

    Args:
        minutes: wall-time budget of the training loop (loading and the final save are outside it).
        clock: seconds, monotonic; injectable for tests.
    """

    def __init__(self, minutes: float, clock: Callable[[], float] = time.monotonic):
        if not minutes > 0:
            raise ValueError(f"A time budget must be positive, got {minutes} minutes.")
        self.seconds = 60.0 * minutes
        self.clock = clock
        self.start: float | None = None

    def progress(self) -> float:
        """Share of the budget spent (0 before training starts)."""
        return 0.0 if self.start is None else min(1.0, (self.clock() - self.start) / self.seconds)

    def on_train_begin(self, args, state, control, lr_scheduler=None, **kwargs):
        shape = str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type))
        if shape not in TIME_SCHEDULES:
            raise ValueError(
                f"A time budget runs the schedule over time, which it can for {', '.join(TIME_SCHEDULES)}; "
                f"lr_scheduler_type={shape!r} is not one of them. Set one of those, or drop the time budget."
            )
        scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate may wrap it
        if not isinstance(scheduler, LambdaLR):
            raise TypeError(f"A time budget needs the trainer's LambdaLR schedule, got {type(scheduler).__name__}.")
        warmup = args.warmup_ratio if args.warmup_ratio else 0.0
        self.start = self.clock()

        def by_time(_step: int) -> float:
            return schedule_factor(shape, self.progress(), warmup)

        scheduler.lr_lambdas = [by_time] * len(scheduler.lr_lambdas)
        for group, base in zip(scheduler.optimizer.param_groups, scheduler.base_lrs):
            group["lr"] = base * by_time(0)
        scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]

    def on_step_end(self, args, state, control, **kwargs):
        if self.progress() >= 1.0:
            control.should_training_stop = True
        return control
