"""examples/profile_from_bench.py --curve linear: the eager verification curve fitted from bench turns, each counted in
eager stock's time per token of the same question and turn."""

from __future__ import annotations

import json

import pytest
from example_scripts import load_example

from hf_adaptive_spec.bench.errors import BenchError
from hf_adaptive_spec.profiling.hardware import HardwareProfile

fit = load_example("profile_from_bench")

A, B, C = 0.8, 0.6, 0.04  # f(1) = A, f(n >= 2) = A + B + C (n - 2), in stock's seconds per token


def curve(n: int) -> float:
    return A if n == 1 else A + B + C * (n - 2)


def run_records(speeds: list[float]) -> list[dict]:
    """A run of one question per speed (stock's seconds per token there: the machine drifting between questions), each
    with stock and a speculative method whose turns verify exactly ``curve`` in those seconds."""
    records = []
    for question, unit in enumerate(speeds):
        stock_turns, turns = [], []
        for turn in range(2):
            verified = [1, 5, 9, 13, 1, 2][turn + question % 3:] + [9] * (question % 4)
            stock_turns.append({"turn": turn, "new_tokens": 64, "wall_time": 64 * unit * (1 + turn),
                                "verified_tokens": None})
            turns.append({"turn": turn, "verified_tokens": verified,
                          "verify_time": sum(curve(n) for n in verified) * unit * (1 + turn)})
        records += [{"question_id": question, "method": "stock", "turns": stock_turns},
                    {"question_id": question, "method": "eagle3", "turns": turns}]
    return records


def eager_profile(**changes) -> HardwareProfile:
    values = dict(device="cpu", dtype="float32", num_threads=2, context_length=256, verify_tokens=[1, 4, 8, 16],
                  verify_seconds=[0.1, 0.3, 0.2, 0.25], draft_step_seconds=0.02)
    return HardwareProfile(**{**values, **changes})


def test_the_fit_recovers_the_curve_through_the_machine_s_drift():
    turns = fit.turns_against_stock(run_records([0.05, 0.1, 0.2, 0.07, 0.15, 0.3]))
    assert fit.fit_linear_curve(turns) == pytest.approx((A, B, C), rel=1e-9)


def test_each_turn_is_counted_in_stock_s_time_of_its_own_question_and_turn():
    records = run_records([0.05, 0.2]) + [{"question_id": 7, "method": "eagle3", "turns": [
        {"turn": 0, "verified_tokens": [4], "verify_time": 1.0}]}]  # no stock for question 7
    turns = fit.turns_against_stock(records)
    assert [turn["stock_seconds_per_token"] for turn in turns] == pytest.approx([0.05, 0.1, 0.2, 0.4])
    with pytest.raises(ValueError, match="No 'stock' turns"):
        fit.turns_against_stock([record for record in records if record["method"] != "stock"])


def test_the_profile_keeps_its_one_token_time_and_takes_the_fitted_shape():
    profile = fit.linear_profile(eager_profile(), fit.turns_against_stock(run_records([0.05, 0.1, 0.2, 0.07])))
    assert profile.verify_tokens == [1, 2, 4, 8, 16]
    for n in (1, 2, 3, 4, 6, 8, 12, 16):  # interpolating between its sizes is the fitted line
        assert profile.verify_time(n) == pytest.approx(0.1 * curve(n) / A)
    assert profile.context_length == 0 and profile.draft_step_seconds == 0.02


def test_a_fit_that_is_not_monotone_or_a_bucketed_profile_is_refused():
    flat = [{"verified_tokens": [1, 9], "verify_time": 2.0, "stock_seconds_per_token": 1.0},
            {"verified_tokens": [1, 1, 9, 9], "verify_time": 4.0, "stock_seconds_per_token": 1.0},
            {"verified_tokens": [5, 9], "verify_time": 5.0, "stock_seconds_per_token": 1.0},
            {"verified_tokens": [1, 5], "verify_time": 3.0, "stock_seconds_per_token": 1.0}]
    with pytest.raises(ValueError, match="not monotone"):
        fit.linear_profile(eager_profile(), flat)
    with pytest.raises(ValueError, match="fits the eager path"):
        fit.linear_profile(eager_profile(path="compiled", buckets=[4, 8], verify_tokens=[1, 4, 8],
                                         verify_seconds=[0.1, 0.2, 0.3]),
                           fit.turns_against_stock(run_records([0.1, 0.2, 0.3])))


def test_records_load_from_a_bench_json_and_a_progress_file(tmp_path):
    records = run_records([0.1, 0.2])
    (tmp_path / "run.json").write_text(json.dumps({"settings": {}, "records": records}))
    (tmp_path / "run.progress.jsonl").write_text("\n".join(json.dumps(line) for line in [{"settings": {}}, *records]))
    assert fit.load_records(tmp_path / "run.json") == records == fit.load_records(tmp_path / "run.progress.jsonl")


def cycle_records(speeds: list[float], curve_of) -> list[dict]:
    """``run_records``' questions with each cycle's verify seconds kept (``verify_times``), verifying ``curve_of``."""
    records = run_records(speeds)
    for record, unit in zip(records[1::2], speeds):
        for turn in record["turns"]:
            turn["verify_times"] = [curve_of(n) * unit * (1 + turn["turn"]) for n in turn["verified_tokens"]]
    return records


def test_the_per_cycle_curve_is_each_size_s_median_cycle_through_the_machine_s_drift():
    turns = fit.turns_against_stock(cycle_records([0.05, 0.1, 0.2, 0.07, 0.15, 0.3], curve))
    sizes, units = fit.cycle_curve(turns, min_cycles=1)
    assert sizes == [1, 2, 5, 9, 13] and units == pytest.approx([curve(n) for n in sizes])
    profile = fit.per_cycle_profile(eager_profile(), turns, min_cycles=1)
    assert profile.verify_time(1) == pytest.approx(0.1) and profile.verify_time(9) == pytest.approx(0.1 * curve(9) / A)
    like_13 = 0.25 * (0.1 * curve(13) / A) / eager_profile().verify_time(13)  # --like's 16, scaled like 13
    assert profile.verify_time(16) == pytest.approx(like_13)
    assert fit.cycle_curve(turns, min_cycles=7)[0] == [1, 2, 9, 13]  # 5, seen in 6 cycles, is left out


def test_the_per_cycle_curve_is_made_non_decreasing_and_needs_one_token_cycles_and_verify_times():
    dip = {1: 1.0, 2: 1.5, 5: 1.3, 9: 1.6, 13: 1.7}  # 5 tokens measured cheaper than 2: pooled with it
    profile = fit.per_cycle_profile(
        eager_profile(), fit.turns_against_stock(cycle_records([0.1, 0.2, 0.3], dip.get)), 1
    )
    assert profile.verify_time(2) == pytest.approx(profile.verify_time(5)) and profile.verify_time(2) < 0.1 * dip[2]
    assert all(a <= b for a, b in zip(profile.verify_seconds, profile.verify_seconds[1:]))
    no_single = [{**turn, "verified_tokens": [n for n in turn["verified_tokens"] if n > 1]}
                 for turn in fit.turns_against_stock(cycle_records([0.1, 0.2], curve))]
    for turn in no_single:
        turn["verify_times"] = turn["verify_times"][:len(turn["verified_tokens"])]
    with pytest.raises(ValueError, match="one token alone"):
        fit.per_cycle_profile(eager_profile(), no_single, 1)
    with pytest.raises(ValueError, match="needs each cycle's verify seconds"):
        fit.cycle_curve(fit.turns_against_stock(run_records([0.1, 0.2])), 1)


@pytest.mark.parametrize("content", ['{"device": "cpu", "verify_tokens": [1]}', "[1, 2]", '{"settings": {}}\n{"a": 1}'])
def test_a_file_that_is_no_bench_report_is_refused_by_name(content, tmp_path):
    """A profile given as --bench failed in KeyError: 'records', a progress file in --curve per-size's
    JSONDecodeError."""
    path = tmp_path / "profile.json"
    path.write_text(content)
    for load in (fit.read_report, fit.load_records):
        with pytest.raises(BenchError, match=f"{path} is not a bench report.*hf-adaptive-spec bench --json"):
            load(path)


def test_sizes_verified_in_too_few_cycles_are_refused_naming_min_cycles():
    """No size reached --min-cycles (500 by default) on a short run: numpy's LinAlgError, '1-dimensional array
    given', on the eager profile, before the bucketed profile's own check."""
    turns = [turn for record in run_records([0.1, 0.2]) if record["method"] != "stock" for turn in record["turns"]]
    with pytest.raises(ValueError, match=r"in 500 cycles \(the most: \d+\): lower --min-cycles"):
        fit.fit_verify_seconds(turns, 500)
    bucketed = eager_profile(path="compiled", buckets=[4, 16], verify_tokens=[1, 4, 16], verify_seconds=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="lower --min-cycles"):
        fit.bucketed_profile(bucketed, turns, 500, 0.01, 512)


def test_min_cycles_with_the_linear_curve_is_refused(monkeypatch, capsys):
    """--curve linear fits every turn: --min-cycles was ignored without a word."""
    monkeypatch.setattr(fit.HardwareProfile, "load", lambda path: pytest.fail("went on to fit"))
    monkeypatch.setattr("sys.argv", ["profile_from_bench.py", "--curve", "linear", "--min-cycles", "100",
                                     "--bench", "run.json", "--like", "p.json", "--output", "out.json"])
    with pytest.raises(SystemExit) as exit_info:
        fit.main()
    assert exit_info.value.code == 2
    assert "--curve linear fits every turn, whatever sizes it verified: --min-cycles would be ignored" in (
        capsys.readouterr().err
    )
