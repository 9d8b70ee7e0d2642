"""A training script closes the process group its run opened: left open, gloo's worker threads may still hold tensors
while the interpreter finalizes, and a rank that finished training dies of SIGABRT (torchrun then fails the run)."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from hf_adaptive_spec.training.base import run_training_script
from hf_adaptive_spec.training.ltd.script import make_parser

pytestmark = pytest.mark.usefixtures("placeholder_inputs")  # the inputs the argv below names


def _open_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)


def _argv(tmp_path):
    return ["--output_dir", str(tmp_path / "out"), "--profile_path", "p.json", "--recording_dir", "rec"]


@pytest.mark.parametrize("fails", [False, True])
def test_a_group_opened_during_the_run_is_closed_at_its_end_even_a_failed_one(tmp_path, fails):
    def main(script_args, training_args):  # as the Trainer does under torchrun
        _open_group(tmp_path)
        if fails:
            raise RuntimeError("training failed")

    try:
        if fails:
            with pytest.raises(RuntimeError, match="training failed"):
                run_training_script(make_parser(), main, _argv(tmp_path))
        else:
            assert run_training_script(make_parser(), main, _argv(tmp_path)) == 0
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_a_group_the_caller_opened_is_left_to_the_caller(tmp_path):
    _open_group(tmp_path)
    try:
        run_training_script(make_parser(), lambda *_: None, _argv(tmp_path))
        assert dist.is_initialized()
    finally:
        dist.destroy_process_group()


def test_a_group_that_cannot_be_closed_does_not_replace_the_runs_own_error(tmp_path, monkeypatch):
    import hf_adaptive_spec.training.base as base

    def stuck():
        raise RuntimeError("a peer is gone")

    monkeypatch.setattr(base, "end_process_group", stuck)

    def main(script_args, training_args):
        _open_group(tmp_path)
        raise ValueError("the run's own error")

    try:
        with pytest.raises(ValueError, match="the run's own error"):
            run_training_script(make_parser(), main, _argv(tmp_path))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_the_group_is_closed_and_then_the_interpreter_lock_left_to_its_workers(tmp_path, monkeypatch):
    """A gloo worker frees each collective's work after the caller's wait returns, and needs the interpreter lock to
    free a tensor Python made. A rank that exits a few milliseconds after its last collective reached finalization
    first and died of SIGABRT (CI's two-rank EAGLE-3 test; 2 of 122 runs here, and a core dump showed the worker in
    ~AsyncAllgatherWork taking the lock). The group is closed, then the lock is released for the workers; with no
    group open nothing waits."""
    import types

    import hf_adaptive_spec.training.base as base

    sleeps = []
    monkeypatch.setattr(base, "time", types.SimpleNamespace(sleep=lambda s: sleeps.append((s, dist.is_initialized()))))
    base.end_process_group()
    assert sleeps == []
    _open_group(tmp_path)
    try:
        base.end_process_group()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert sleeps == [(base.WORKER_DRAIN_SECONDS, False)]
    assert base.WORKER_DRAIN_SECONDS >= 0.1  # 20 of Python's 5 ms switch intervals at least
