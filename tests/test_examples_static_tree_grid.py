"""``examples/static_tree_grid.py`` refuses a grid it would count wrongly, before the models load."""

from __future__ import annotations

import pytest
from example_scripts import load_example


@pytest.mark.parametrize(("argv", "error"), [
    (["--shapes", "1,1,2", "2,2,4", "1,1,2"], "--shapes names a tree twice"),  # its totals summed twice: 8/4 identical
    (["--questions", "0"], "--questions 0: give at least 1"),  # stock's rate divided by zero seconds
])
def test_a_tree_named_twice_or_no_question_is_refused(argv, error, monkeypatch, capsys):
    example = load_example("static_tree_grid")
    monkeypatch.setattr(example.hfas, "load_default_model", lambda **kwargs: pytest.fail("loaded the models"))
    monkeypatch.setattr("sys.argv", ["static_tree_grid.py", *argv])
    with pytest.raises(SystemExit) as exit_info:
        example.main()
    assert exit_info.value.code == 2
    assert error in capsys.readouterr().err
