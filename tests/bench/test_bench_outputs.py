"""JSON, Markdown and PNG outputs written from a report."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest
import torch

from hf_adaptive_spec.bench.markdown import render_markdown, write_markdown
from hf_adaptive_spec.bench.plots import write_plots
from hf_adaptive_spec.bench.progress import read_progress
from hf_adaptive_spec.bench.report import build_report, write_json

from .bench_fakes import hand_made_records, record, turn

SETTINGS = {"model": "tiny", "dtype": "float32", "options": {"max_new_tokens": 8}}
PLOTS = {"speedup_by_category.png", "mean_accepted_tokens.png", "time_split.png", "accepted_length_histogram.png"}


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG header; fails on anything that is not a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def report(records=None):
    return build_report(records or hand_made_records(), SETTINGS, torch.device("cpu"))


def test_json_round_trips_with_summary_keys(tmp_path: Path):
    path = tmp_path / "nested" / "out.json"
    write_json(report(), path)
    data = json.loads(path.read_text())
    assert data["settings"] == SETTINGS
    assert data["summary"]["fast"]["speedup"] == pytest.approx(3.6)
    assert data["summary"]["fast"]["identical"] is False
    assert data["summary"]["fast"]["mean_accepted_tokens"] == pytest.approx(3.0)
    assert {"torch", "transformers", "device", "instruction_set"} <= set(data["environment"])


def test_markdown_has_a_row_per_method_and_a_category_table(tmp_path: Path):
    text = render_markdown(report())
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert ("| 3.60× | 2.00× | 3.60× | 3.00 | 3.00 | 4.00 | **no** (1 turns) | – | – | 16% | 32% | 8% | 44% |"
            in rows["fast"])
    assert "| 1.00× | 1.00× | 1.00× | 1.00† | – | – | yes | – | – | – | – | – | – |" in rows["stock"]
    assert rows["math"] == "| math | 1.00× | 6.00× |"
    instruction_set = report()["environment"]["instruction_set"]
    # what a tree costs in bfloat16 hangs on it
    assert f"on {report()['environment']['device']} ({instruction_set})," in text
    path = tmp_path / "out.md"
    write_markdown(report(), path)
    assert path.read_text() == text


def test_a_report_write_cut_by_a_crash_leaves_the_report_before_it(tmp_path: Path, crash_mid_write):
    """A run killed while it wrote its JSON report left half a JSON file: --report_only and --resume then failed on it
    with a bare JSONDecodeError (reading whether it is a finished run's report)."""
    json_path, markdown_path = tmp_path / "out.json", tmp_path / "out.md"
    write_json(report(), json_path)
    write_markdown(report(), markdown_path)
    before = json_path.read_text(), markdown_path.read_text()
    rerun = report([record(1, "stock", turn(5, 1.0))])
    with crash_mid_write():
        write_json(rerun, json_path)
    with crash_mid_write():
        write_markdown(rerun, markdown_path)
    assert (json_path.read_text(), markdown_path.read_text()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "out.md"]


def test_a_crash_while_the_progress_file_is_repaired_leaves_its_records(tmp_path: Path, crash_mid_write):
    """Removing a last line cut short rewrote the progress file in place: a crash then left half of it, and the
    finished records measured before were lost (or the file no longer read as a progress file)."""
    path = tmp_path / "out.progress.jsonl"
    finished = [json.dumps(record(question, "stock", turn(5, 1.0)).to_dict()) for question in (1, 2)]
    path.write_text("\n".join([json.dumps({"settings": SETTINGS}), *finished, finished[0][:20]]) + "\n")
    with crash_mid_write():
        read_progress(path, repair=True)
    settings, completed = read_progress(path, repair=True)
    assert settings == SETTINGS and sorted(completed) == [(1, "stock"), (2, "stock")]
    assert path.read_text().splitlines()[1:] == finished


@pytest.mark.parametrize("with_stats", [True, False])
def test_plots_are_valid_pngs(tmp_path: Path, with_stats: bool):
    records = hand_made_records() if with_stats else [record(1, "stock", turn(4, 1.0)), record(1, "b", turn(4, 0.5))]
    paths = write_plots(report(records), tmp_path / "plots")
    assert {path.name for path in paths} == PLOTS
    for path in paths:
        width, height = png_size(path)
        assert width > 100 and height > 100


@pytest.mark.parametrize("field,note", [
    ("policy_cost_curve_mismatch", "policy on another cost curve"),
    ("policy_drafter_mismatch", "policy trained with another drafter"),
    ("policy_lookup_mismatch", "policy trained with another prompt-lookup branch"),
])
def test_a_policy_that_does_not_fit_its_run_is_shown(field, note):
    """Each of the engine's reports reaches the method's summary (the first turn that said so) and a markdown note."""
    records = hand_made_records()
    for rec in records:
        if rec.method == "fast":
            setattr(rec.turns[-1], field, "LTDPolicy was trained with something else")
    data = report(records)
    assert data["summary"]["fast"][field] == "LTDPolicy was trained with something else"
    assert data["summary"]["stock"][field] is None
    assert f"**`fast`: {note}.** LTDPolicy was trained" in render_markdown(data)


def test_the_speedup_plot_is_over_the_runs_reference():
    from matplotlib.figure import Figure

    from hf_adaptive_spec.bench.plots import _speedup_by_category

    axes = Figure().add_subplot()
    _speedup_by_category(
        axes, build_report(hand_made_records(), SETTINGS, torch.device("cpu"), reference="fast")["summary"]
    )
    assert axes.get_ylabel() == "speedup over fast"
    assert [text.get_text() for text in axes.get_legend().get_texts()] == ["stock"]  # the reference is the 1.0 line


def test_trees_the_static_path_capped_are_counted_per_method_and_shown():
    """A tree larger than the largest verification bucket runs smaller under its method's name: the engine counts the
    cycles (out.speculation.capped_trees), and the bench kept none of it (found by a review)."""
    from types import SimpleNamespace

    from hf_adaptive_spec.bench.runner import _turn_record

    stats = SimpleNamespace(accepted_lengths=[1, 2], draft_depths=[2, 2], verified_tokens=[32, 32], draft_time=0.1,
                            verify_time=0.2, policy_time=0.0, compile_time=0.0, capped_trees=2)
    assert _turn_record(0, [1, 2, 3], None, 1.0, None, stats).capped_trees == 2
    records = hand_made_records()
    fast = [rec for rec in records if rec.method == "fast"]
    fast[0].turns[0].capped_trees, fast[-1].turns[-1].capped_trees = 3, 4
    data = report(records)
    assert data["summary"]["fast"]["capped_trees"] == 7 and data["summary"]["stock"]["capped_trees"] is None
    assert "**Trees capped to the largest verification bucket** (smaller than the method asked for): `fast` in 7" in (
        render_markdown(data)
    )
    assert "capped" not in render_markdown(report())


def test_an_unknown_speedup_draws_no_bar_rather_than_a_zero_one(tmp_path: Path):
    """A method with no question of a category in common with the reference has no speedup there: it was drawn as a
    0 bar, which reads as a method that generated nothing."""
    from hf_adaptive_spec.bench.plots import speedup_series

    records = [record(1, "stock", turn(4, 1.0), category="math"), record(1, "fast", turn(4, 0.5), category="math"),
               record(2, "fast", turn(4, 0.5), category="code")]
    reference, groups, series = speedup_series(report(records)["summary"])
    assert reference == "stock" and groups == ["math", "code", "overall"]
    assert series["fast"][0] == pytest.approx(2.0) and math.isnan(series["fast"][1])
    assert series["fast"][2] == pytest.approx(2.0)  # over the questions both ran
    assert "speedup_by_category.png" in {path.name for path in write_plots(report(records), tmp_path)}


def test_the_environment_says_whether_transformers_can_adapt_its_confidence_threshold():
    """transformers adapts assistant_confidence_threshold only when scikit-learn imports: hf-assistant's numbers
    depend on it, and the report did not say."""
    from transformers.utils import is_sklearn_available

    assert report()["environment"]["scikit_learn"] is is_sklearn_available()
