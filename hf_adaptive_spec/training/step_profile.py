"""Where a training step's time goes: ``torch.profiler`` over a few optimizer steps, its table written beside the run.

A lent accelerator is held for minutes, and a stage that spends a few seconds of them profiling tells the next one
what to make cheaper per token (the target's forward, the drafter's unrolled steps, the loss, the host's share).
:class:`StepProfileCallback` profiles ``steps`` optimizer steps after ``skip`` warm-up steps and writes the operator
table, sorted by accelerator time where there is one (host time on a CPU), to ``output_dir/step_profile.txt``,
after the phases: the ranges a trainer names ``train.<phase>`` with ``torch.profiler.record_function`` (the EAGLE-3
trainer: ``train.target_features``, ``train.draft_and_loss``), the optimizer's step and the data loader's.
"""

from __future__ import annotations

import logging
import os
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from transformers import TrainerCallback

logger = logging.getLogger(__name__)

PROFILE_FILE = "step_profile.txt"
#: the rows the phase summary lists: a trainer's own ranges, then the ones torch and the Trainer name themselves.
PHASE_PREFIXES = ("train.", "Optimizer.step", "enumerate(DataLoader)")


class StepProfileCallback(TrainerCallback):
    """Profile optimizer steps ``skip + 1 .. skip + steps`` of this run (counted from where it starts or resumes).

    Args:
        steps: optimizer steps profiled.
        skip: steps run first, unprofiled (one-off costs: allocator growth, kernel selection, compilation).
        row_limit: operators listed in the table.
    """

    def __init__(self, steps: int, skip: int = 3, row_limit: int = 30):
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"profile steps must be a positive integer, got {steps!r} (0 turns profiling off).")
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
            raise ValueError(f"The steps run before profiling must be an integer >= 0, got {skip!r}.")
        self.steps, self.skip, self.row_limit = steps, skip, row_limit
        self.first_step: int | None = None
        self.profiler: profile | None = None
        self.started_at = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.first_step = state.global_step + self.skip
        if self.skip == 0:
            self._start(args, state)

    def on_step_end(self, args, state, control, **kwargs):
        """The window runs from the end of step ``first_step`` to the end of ``first_step + steps``: whole steps, their
        batches' loading included (the Trainer fetches a step's batches before its ``on_step_begin``)."""
        if state.global_step == self.first_step:  # once a run: steps only count up
            self._start(args, state)
        elif self.profiler is not None and state.global_step >= self.first_step + self.steps:
            self._finish(args, state)

    def on_train_end(self, args, state, control, **kwargs):
        if self.profiler is not None:  # the run ended inside the profiled steps: report the ones it ran
            self._finish(args, state)

    def _start(self, args, state) -> None:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        try:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.profiler = profile(activities=activities)
            self.profiler.__enter__()
        except Exception as error:  # a machine whose profiler does not start still trains the stage
            self.profiler = None
            self._report(args, state, f"the profiler did not start ({type(error).__name__}: {error}); training went "
                                      "on unprofiled\n", logging.WARNING)
        self.started_at = time.perf_counter()

    def _finish(self, args, state) -> None:
        profiled, self.profiler = self.profiler, None
        try:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            seconds = time.perf_counter() - self.started_at
            profiled.__exit__(None, None, None)
            text = self._profile_text(profiled.key_averages(), state.global_step - self.first_step, seconds)
        except Exception as error:  # the steps are trained; only their profile is lost
            lost = f"the profiler did not finish ({type(error).__name__}: {error})\n"
            self._report(args, state, lost, logging.WARNING)
            return
        self._report(args, state, text, logging.INFO)

    def _profile_text(self, averages, steps: int, seconds: float) -> str:
        sort_by = "self_device_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
        return (f"optimizer steps {self.first_step + 1}..{self.first_step + steps} ({steps}): {seconds:.3f} s wall, "
                f"{seconds / max(steps, 1):.3f} s a step\n{phase_summary(averages, steps)}operators by {sort_by}\n"
                f"{averages.table(sort_by=sort_by, row_limit=self.row_limit)}\n")

    @staticmethod
    def _report(args, state, text: str, level: int) -> None:
        """``text`` to the log and, from the main process, to ``output_dir/step_profile.txt`` (a file that cannot be
        written is logged: the stage trains on)."""
        logger.log(level, "step profile (%s):\n%s", PROFILE_FILE, text)
        if not state.is_world_process_zero:
            return
        try:
            os.makedirs(args.output_dir, exist_ok=True)
            with open(os.path.join(args.output_dir, PROFILE_FILE), "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as error:
            logger.warning("The step profile could not be written to %s: %s", args.output_dir, error)


def phase_summary(averages, steps: int) -> str:
    """One line per named phase (:data:`PHASE_PREFIXES`): its host and accelerator milliseconds a step, and calls.
    On CUDA a range has two rows, the host's and the device's span of its kernels; the line takes each time from its
    own row (the device row's when there is one)."""
    host, device = {}, {}
    for row in averages:
        if row.key.startswith(PHASE_PREFIXES):
            (host if row.device_type == DeviceType.CPU else device)[row.key] = row
    lines = []
    for key, row in host.items():
        accelerator = device[key].device_time_total if key in device else row.device_time_total
        lines.append(f"  {key}: host {row.cpu_time_total / 1e3 / max(steps, 1):.2f} ms, accelerator "
                     f"{accelerator / 1e3 / max(steps, 1):.2f} ms a step ({row.count} calls)\n")
    return "phases:\n" + "".join(lines) if lines else ""
