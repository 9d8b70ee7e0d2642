"""``examples/plot_learning_curve.py`` writes its plot and table where --output says, folders included."""

from __future__ import annotations

from pathlib import Path

import pytest
from example_scripts import load_example

REPO = Path(__file__).resolve().parents[1]


def test_output_in_a_folder_that_does_not_exist_yet(tmp_path):
    example = load_example("plot_learning_curve")
    output = tmp_path / "curve" / "new" / "mymodel"
    example.main(["--curve", f"stage 6={REPO / 'artifacts' / 'eagle3-smollm2-stage6'}", "--output", str(output)])
    assert output.with_suffix(".png").stat().st_size > 0
    assert "| stage 6 |" in output.with_suffix(".md").read_text()


@pytest.mark.parametrize("spec", ["artifacts/eagle3-smollm2-stage6", "stage 6=", "=artifacts/eagle3-smollm2-stage6"])
def test_a_curve_without_its_label_or_folder_is_refused_by_name(spec, tmp_path, capsys):
    """A bare folder was read as a label with an empty path, and the error blamed a curve in the working folder."""
    with pytest.raises(SystemExit):
        load_example("plot_learning_curve").main(["--curve", spec, "--output", str(tmp_path / "curve")])
    assert f"--curve takes LABEL=FOLDER (or LABEL=a curve file), got {spec!r}" in capsys.readouterr().err


def test_plot_dvi_stream_refuses_a_log_without_its_label(tmp_path, monkeypatch, capsys):
    """``--log PATH`` without ``LABEL=`` stopped in a tuple unpacking (ValueError: not enough values to unpack)."""
    log = tmp_path / "dvi_train.log"
    log.write_text("{'acceptance_rate': 0.5, 'mean_accepted_tokens': 1.5}\n")
    monkeypatch.setattr("sys.argv", ["plot_dvi_stream.py", "--log", str(log), "--output", str(tmp_path / "x.png")])
    with pytest.raises(SystemExit):
        load_example("plot_dvi_stream").main()
    assert f"--log takes LABEL=PATH, got {str(log)!r}" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(("log_text", "argv", "error"), [
    ("{'loss': 1.0, 'epoch': 0.1}\n", [], "no line holds 'acceptance_rate'"),
    (None, [], "no file"),
    ("{'acceptance_rate': 0.5, 'mean_accepted_tokens': 1.5}\n", ["--window", "0"], "--window 0: give at least 1"),
    ("{'acceptance_rate': 0.5, 'mean_accepted_tokens': 1.5}\n", ["--prompts-per-line", "0"],
     "--prompts-per-line 0: give at least 1"),
])
def test_plot_dvi_stream_refuses_a_log_without_metrics_and_empty_windows(
    log_text, argv, error, tmp_path, monkeypatch, capsys
):
    """A log of another run (no 'acceptance_rate' line) was drawn as an empty plot, exit status 0; ``--window 0``
    divided by zero."""
    log = tmp_path / "dvi_train.log"
    if log_text is not None:
        log.write_text(log_text)
    output = tmp_path / "x.png"
    monkeypatch.setattr("sys.argv", ["plot_dvi_stream.py", "--log", f"run={log}", "--output", str(output), *argv])
    with pytest.raises(SystemExit) as exit_info:
        load_example("plot_dvi_stream").main()
    assert exit_info.value.code == 2
    assert error in capsys.readouterr().err
    assert not output.exists()


@pytest.mark.parametrize("spec", ["artifacts/eagle3_heldout_regenerated.jsonl", "held out=", "held out=nowhere.jsonl"])
def test_heldout_accuracy_refuses_a_set_without_its_label_or_file_before_loading_models(spec, capsys, monkeypatch):
    """A --set without LABEL= or with a missing file failed only after the target and drafter had loaded."""
    example = load_example("eagle3_heldout_accuracy")
    monkeypatch.setattr(example.hfas, "load_default_model", lambda **kwargs: pytest.fail("loaded the models"))
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--set", spec])
    assert exit_info.value.code == 2
    assert "--set" in capsys.readouterr().err


def _no_benchmark(example, monkeypatch) -> None:
    """Make loading a model, the first step of ``eagle3_loss_memory``'s benchmark, fail the test instead of running."""
    monkeypatch.setattr(example.hfas, "load_default_model", lambda **kwargs: pytest.fail("ran the benchmark"))
    monkeypatch.setattr(example.Eagle3DraftModel, "from_pretrained", lambda *a, **k: pytest.fail("ran the benchmark"))


def test_loss_memory_help_exits_without_running_the_benchmark(monkeypatch, capsys):
    """The script had no argument parser: ``--help`` ran the whole benchmark (~30 s, and the derived held-out file)."""
    example = load_example("eagle3_loss_memory")
    _no_benchmark(example, monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--heldout" in out and "artifacts/eagle3_heldout_regenerated.jsonl" in out and "--checkpoint" in out


def test_loss_memory_refuses_a_missing_heldout_file_naming_where_it_comes_from(tmp_path, monkeypatch, capsys):
    example = load_example("eagle3_loss_memory")
    _no_benchmark(example, monkeypatch)
    missing = tmp_path / "eagle3_heldout_regenerated.jsonl"
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--heldout", str(missing)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "artifacts/README.md" in err


def test_a_label_given_twice_is_refused(tmp_path, capsys):
    """The second curve of a label replaced the first, unsaid: one curve drawn and tabulated for two given."""
    stage6 = REPO / "artifacts" / "eagle3-smollm2-stage6"
    with pytest.raises(SystemExit) as exit_info:
        load_example("plot_learning_curve").main(
            ["--curve", f"run={stage6}", "--curve", f"run={REPO / 'artifacts' / 'eagle3-smollm2-stage7'}",
             "--output", str(tmp_path / "curve")]
        )
    assert exit_info.value.code == 2
    assert "--curve names 'run' twice: give each curve a label of its own" in capsys.readouterr().err
    assert not (tmp_path / "curve.png").exists()


def test_curves_of_other_chain_depths_each_say_theirs(tmp_path):
    """The τ axis said the first curve's depth for every curve."""
    import matplotlib.pyplot as plt

    from hf_adaptive_spec.training.eagle3 import HeldOutPoint

    def points(depth: int) -> list[HeldOutPoint]:
        return [HeldOutPoint(step=step, input_tokens_seen=1000 * step, first_draft_acceptance=0.4,
                             step_accuracy=[0.4] * depth, chain_tau=1.5, positions=100) for step in (1, 2)]

    example = load_example("plot_learning_curve")
    example.plot({"three": points(3), "four": points(4)}, None, str(tmp_path / "curve.png"), "reference")
    tau = plt.gcf().axes[1]
    assert tau.get_ylabel() == "held-out greedy chain τ (depths 3, 4, each curve's in its legend)"
    assert [line.get_label() for line in tau.get_lines()] == ["three, every position, depth 3",
                                                              "four, every position, depth 4"]
    example.plot({"three": points(3), "also three": points(3)}, None, str(tmp_path / "same.png"), "reference")
    assert plt.gcf().axes[1].get_ylabel() == "held-out greedy chain τ (depth 3)"
    assert plt.gcf().axes[1].get_lines()[0].get_label() == "three, every position"
    plt.close("all")
