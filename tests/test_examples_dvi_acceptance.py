"""``examples/dvi_acceptance.py``: the training data goes with training heads, before the target loads."""

from __future__ import annotations

import pytest
from example_scripts import load_example


@pytest.mark.parametrize("argv", [
    ["--exit-layers", "2", "4"],  # no data to train on: load_completions named the trainer's --completions_path
    ["--adapters", "artifacts/dvi-smollm2", "--completions", "train.jsonl"],  # silently ignored
])
def test_completions_only_with_exit_layers(argv, monkeypatch, capsys):
    example = load_example("dvi_acceptance")
    monkeypatch.setattr(example.hfas, "load_default_model", lambda **kwargs: pytest.fail("loaded the target"))
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--held-out", "heldout.jsonl", *argv])
    assert exit_info.value.code == 2
    assert "give --completions JSONL with --exit-layers, and not with --adapters" in capsys.readouterr().err
