"""A trainer script's ``--log_level`` reaches this package's messages, from the script's start."""

from __future__ import annotations

import logging

import pytest
from transformers.utils import logging as transformers_logging

from hf_adaptive_spec.training.base import run_training_script

pytestmark = pytest.mark.usefixtures("placeholder_inputs")  # the inputs the argv below names


@pytest.fixture
def restored_levels():
    package = logging.getLogger("hf_adaptive_spec")
    level, verbosity = package.level, transformers_logging.get_verbosity()
    yield
    package.setLevel(level)
    transformers_logging.set_verbosity(verbosity)


@pytest.mark.parametrize("log_level, shown", [("info", True), ("warning", False)])
def test_log_level_sets_the_package_loggers_before_main_runs(tmp_path, restored_levels, log_level, shown):
    """DVI's "Continuing ...'s KL->RL schedule" is an info message of a package logger, logged before training; the
    Trainer sets only transformers' level, so ``--log_level info`` did not show it."""
    from hf_adaptive_spec.training.dvi import trainer as dvi_trainer
    from hf_adaptive_spec.training.ltd.script import make_parser

    seen = {}

    def main(script_args, training_args):
        seen["package"] = dvi_trainer.logger.isEnabledFor(logging.INFO)
        seen["transformers"] = transformers_logging.get_logger("transformers.trainer").isEnabledFor(logging.INFO)

    argv = ["--output_dir", str(tmp_path / "out"), "--profile_path", "p.json", "--recording_dir", "rec",
            "--log_level", log_level]
    run_training_script(make_parser(), main, argv)
    assert seen == {"package": shown, "transformers": shown}


@pytest.fixture
def root_at_info():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    yield
    root.setLevel(level)


def test_passive_leaves_an_applications_levels_alone(tmp_path, restored_levels, root_at_info):
    """Under the default ``--log_level passive`` a script used as a library keeps the application's
    ``logging.basicConfig(level=INFO)``: the package logger was pinned to transformers' WARNING."""
    from hf_adaptive_spec.training.ltd.script import make_parser

    verbosity = transformers_logging.get_verbosity()
    seen = {}

    def main(script_args, training_args):
        seen["package"] = logging.getLogger("hf_adaptive_spec").getEffectiveLevel()
        seen["transformers"] = transformers_logging.get_verbosity()

    argv = ["--output_dir", str(tmp_path / "out"), "--profile_path", "p.json", "--recording_dir", "rec"]
    run_training_script(make_parser(), main, argv)
    assert seen == {"package": logging.INFO, "transformers": verbosity}


@pytest.mark.parametrize("fails", [False, True], ids=["finished", "failed"])
def test_the_levels_and_handler_a_script_set_are_restored_when_it_returns(tmp_path, restored_levels, fails):
    """A script called from Python (``run(argv)`` in a notebook or a sweep) gives back the package logger's level and
    handlers and transformers' verbosity, even when it fails: ``--log_level error`` left the package's warnings
    hidden after the call."""
    from hf_adaptive_spec.training.ltd.script import make_parser

    package = logging.getLogger("hf_adaptive_spec")
    before = (package.level, list(package.handlers), transformers_logging.get_verbosity())
    seen = {}

    def main(script_args, training_args):
        seen["during"] = (package.level, transformers_logging.get_verbosity())
        if fails:
            raise RuntimeError("the run failed")

    argv = ["--output_dir", str(tmp_path / "out"), "--profile_path", "p.json", "--recording_dir", "rec",
            "--log_level", "error"]
    if fails:
        with pytest.raises(RuntimeError, match="the run failed"):
            run_training_script(make_parser(), main, argv)
    else:
        run_training_script(make_parser(), main, argv)
    assert seen["during"] == (logging.ERROR, logging.ERROR)
    assert (package.level, list(package.handlers), transformers_logging.get_verbosity()) == before
    assert logging.getLogger("hf_adaptive_spec.training.dvi.trainer").isEnabledFor(logging.WARNING)
