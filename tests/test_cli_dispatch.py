"""``hf-adaptive-spec COMMAND`` and ``hf-adaptive-spec train METHOD``: help on stdout, a wrong name named on stderr."""

import pytest

from hf_adaptive_spec.cli import main
from hf_adaptive_spec.training.cli import main as train_main


@pytest.mark.parametrize("dispatch, listed", [(main, "bench"), (train_main, "eagle3")])
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_goes_to_stdout_with_status_0(capsys, dispatch, listed, flag):
    """The help went to stderr: `hf-adaptive-spec --help | less` showed nothing."""
    assert dispatch([flag]) == 0
    out, err = capsys.readouterr()
    assert "usage: hf-adaptive-spec" in out and listed in out and err == ""


@pytest.mark.parametrize("dispatch, what, name, choices", [
    (main, "command", "bnech", "bench, profile, train, record, packages"),
    (train_main, "trainer", "eagel3", "eagle3, ppow, dvi"),
])
def test_an_unknown_command_is_named_with_the_commands_there_are(capsys, dispatch, what, name, choices):
    """An unknown command printed the usage alone (status 2), never saying what was wrong."""
    assert dispatch([name, "--x"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"error: unknown {what} '{name}'; choose one of {choices}" in err


@pytest.mark.parametrize("dispatch, what", [(main, "command"), (train_main, "trainer")])
def test_no_command_is_an_error_naming_what_is_missing(capsys, dispatch, what):
    assert dispatch([]) == 2
    assert f"error: no {what} given; choose one of" in capsys.readouterr().err
