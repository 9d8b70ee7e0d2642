"""Example scripts refuse, before any model or recording loads, an argument they would ignore or fail on raw."""

from __future__ import annotations

import json

import pytest
from example_scripts import load_example


def refused(example, argv: list[str], monkeypatch, capsys, script: str) -> str:
    """Run ``example.main`` with ``argv`` as its command line; the parser's error (exit status 2)."""
    monkeypatch.setattr("sys.argv", [f"{script}.py", *argv])
    with pytest.raises(SystemExit) as exit_info:
        example.main()
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def window_acceptance(monkeypatch):
    example = load_example("eagle3_window_acceptance")
    monkeypatch.setattr(example.hfas, "load_default_model", lambda **kwargs: pytest.fail("loaded the models"))
    return example


def bench_report(tmp_path, methods: list[str]) -> str:
    path = tmp_path / "bench.json"
    records = [{"question_id": 81, "category": "writing", "method": method, "turns": []} for method in methods]
    path.write_text(json.dumps({"settings": {"questions": "question.jsonl"}, "records": records}))
    return str(path)


@pytest.mark.parametrize("flags", [["--dataset", "other.jsonl"], ["--num-conversations", "5"],
                                   ["--dataset", "other.jsonl", "--max-length", "128"]])
def test_window_acceptance_refuses_dataset_flags_with_bench_json(flags, window_acceptance, tmp_path, monkeypatch,
                                                                 capsys):
    """--bench-json took every stock turn, whole: --dataset, --num-conversations and --max-length were ignored."""
    argv = ["--bench-json", bench_report(tmp_path, ["stock"]), *flags]
    error = refused(window_acceptance, argv, monkeypatch, capsys, "eagle3_window_acceptance")
    given = ", ".join(flag for flag in flags if flag.startswith("--"))
    assert f"--bench-json takes every stock turn of the report, whole: {given} would be ignored" in error


@pytest.mark.parametrize(("content", "error"), [
    ('{"device": "cpu", "verify_tokens": [1]}', "is not a bench report"),  # a profile: KeyError 'settings'
    ("{not json", "is not a bench report (not JSON"),
    (None, "no 'stock' records"),  # no τ printed at all, or a NameError with --profile
])
def test_window_acceptance_refuses_a_report_of_another_kind_or_without_stock(
    content, error, window_acceptance, tmp_path, monkeypatch, capsys
):
    path = bench_report(tmp_path, ["eagle3"])
    if content is not None:
        (tmp_path / "bench.json").write_text(content)
    assert error in refused(window_acceptance, ["--bench-json", path], monkeypatch, capsys, "eagle3_window_acceptance")


def test_window_acceptance_refuses_answers_no_window_fits(window_acceptance, monkeypatch, capsys):
    """Answers shorter than the window left no lengths to print: torch.cat of an empty list failed raw, after the
    drafters loaded."""
    short = {"input_ids": [1, 2, 3, 4, 5], "loss_mask": [0, 0, 1, 1, 1]}
    monkeypatch.setattr(window_acceptance.hfas, "load_default_model", lambda **kwargs: (None, None))
    monkeypatch.setattr(window_acceptance, "load_samples", lambda *args: [short, short])
    monkeypatch.setattr(window_acceptance.Eagle3DraftModel, "from_pretrained",
                        lambda *args, **kwargs: pytest.fail("loaded a drafter"))
    error = refused(window_acceptance, ["--window-size", "6"], monkeypatch, capsys, "eagle3_window_acceptance")
    assert "no answer holds a window of --window-size 6 tokens after a prefix: give a smaller --window-size" in error


def test_window_acceptance_leaves_out_a_category_no_window_fits_naming_it(window_acceptance, capsys):
    short, long = ({"input_ids": list(range(n)), "loss_mask": [0, 0] + [1] * (n - 2)} for n in (5, 12))
    groups = {"writing": [short], "coding": [short, long]}
    kept = window_acceptance.with_windows(None, groups, window_size=6)
    assert kept == {"coding": [short, long]}
    assert "writing: no answer holds a window of 6 tokens; left out" in capsys.readouterr().out


def test_heldout_accuracy_refuses_vocabulary_from_without_widen_to(tmp_path, monkeypatch, capsys):
    """--vocabulary-from without --widen-to was read (its samples loaded) and used for nothing."""
    example = load_example("eagle3_heldout_accuracy")
    monkeypatch.setattr(example.hfas, "load_default_model", lambda **kwargs: pytest.fail("loaded the models"))
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text("")
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--set", f"held out={held_out}", "--vocabulary-from", str(held_out)])
    assert exit_info.value.code == 2
    assert "--vocabulary-from only widens the vocabulary to the sizes of --widen-to" in capsys.readouterr().err


@pytest.mark.parametrize(("script", "argv", "error"), [
    ("eagle3_heldout_accuracy", ["--set", "held out=missing.jsonl"],
     "--set held out=missing.jsonl: no file 'missing.jsonl' (derived files: artifacts/README.md)"),
    ("plot_dvi_stream", ["--log", "online=missing.log", "--output", "x.png"], "--log online=missing.log: no file"),
])
def test_a_labelled_file_that_is_missing_is_refused_naming_it(script, argv, error, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    example = load_example(script)
    monkeypatch.setattr("sys.argv", [f"{script}.py", *argv])
    with pytest.raises(SystemExit) as exit_info:
        example.main(argv) if script == "eagle3_heldout_accuracy" else example.main()
    assert exit_info.value.code == 2 and error in capsys.readouterr().err


@pytest.mark.parametrize(("script", "flag", "value"), [
    ("bucket_cost_by_cache_length", "--slots", "512,1k"), ("bucket_cost_by_cache_length", "--slots", "0,512"),
    ("eagle3_vocab_coverage", "--sizes", "2048,,4096"), ("eagle3_vocab_coverage", "--sizes", "-2048"),
])
def test_a_bad_list_of_sizes_is_refused_naming_its_flag(script, flag, value, monkeypatch, capsys):
    """A value that is no number stopped in a bare ValueError (invalid literal for int()) after the models loaded; a
    size below 1 went on to the package."""
    example = load_example(script)
    never = lambda *args, **kwargs: pytest.fail("loaded the models")  # noqa: E731
    if script == "bucket_cost_by_cache_length":
        monkeypatch.setattr(example, "load_model", never)
        argv = ["--eagle3", "drafter", f"{flag}={value}"]
    else:
        monkeypatch.setattr(example.hfas, "load_default_model", never)
        argv = ["--train", "a.jsonl", "--heldout", "b.jsonl", f"{flag}={value}"]
    error = refused(example, argv, monkeypatch, capsys, script)
    assert f"argument {flag}: expected comma-separated whole numbers of at least 1" in error and repr(value) in error


@pytest.mark.parametrize(("argv", "error"), [
    (["--thresholds", "0.1,1.5"], "argument --thresholds: each is a draft probability, from 0 to 1"),
    (["--thresholds=-0.2"], "argument --thresholds: each is a draft probability, from 0 to 1"),
    (["--sizes", "5,seven"], "argument --sizes: expected comma-separated whole numbers of at least 1"),
    (["--sizes", "0"], "argument --sizes: expected comma-separated whole numbers of at least 1"),
])
def test_confidence_gate_refuses_a_threshold_that_is_no_probability(argv, error, monkeypatch, capsys):
    """A threshold above 1 never verified (below 0: always did), each printed as a rule of its own; a value that is no
    number stopped in a bare ValueError after the recording had loaded."""
    example = load_example("replay_confidence_gate")
    monkeypatch.setattr(example, "load_recording", lambda path: pytest.fail("loaded the recording"))
    argv = ["--recording", "rec", "--profile", "profile.json", *argv]
    assert error in refused(example, argv, monkeypatch, capsys, "replay_confidence_gate")
