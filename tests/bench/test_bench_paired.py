"""The paired comparison: ratios of sums per method against a base, medians, and a bootstrap over questions."""

import json

import pytest

from hf_adaptive_spec.bench.errors import BenchError
from hf_adaptive_spec.bench.paired import central_95, compare_paired, load_records, main
from hf_adaptive_spec.bench.records import QuestionRecord, TurnRecord
from hf_adaptive_spec.bench.summary import summarize


def _record(question, method, tokens, seconds):
    return QuestionRecord(question, "writing", method, [TurnRecord(0, tokens, seconds, None)])


def _by_method(comparisons):
    return {c.method: c for c in comparisons}


def test_a_method_twice_as_fast_on_every_question_is_twice_as_fast_with_no_spread():
    records = [_record(q, "base", 100, 2.0) for q in range(5)] + [_record(q, "fast", 100, 1.0) for q in range(5)]
    fast = _by_method(compare_paired(records, "base"))["fast"]
    assert (fast.questions, fast.total, fast.median, fast.faster_in) == (5, 2.0, 2.0, 5)
    assert fast.low == fast.high == 2.0


def test_the_total_is_a_ratio_of_sums_not_a_mean_of_the_per_question_ratios():
    # base: 100 tokens in 1 s, then 100 tokens in 10 s; the method: 4x on the short question, 0.5x on the long one
    records = [_record(0, "base", 100, 1.0), _record(1, "base", 100, 10.0)]
    records += [_record(0, "m", 100, 0.25), _record(1, "m", 100, 20.0)]
    m = _by_method(compare_paired(records, "base"))["m"]
    assert m.total == pytest.approx((200 / 20.25) / (200 / 11.0))  # 0.543x: the long question dominates
    assert m.median == pytest.approx((4.0 + 0.5) / 2)
    assert m.faster_in == 1
    assert m.low <= m.total <= m.high


def test_only_questions_both_ran_are_paired_and_the_bootstrap_is_reproducible():
    records = [_record(q, "base", 100, 1.0 + q) for q in range(6)]
    records += [_record(q, "m", 100, 0.8 + q * 0.9) for q in range(4)]  # two questions not run yet
    first, second = compare_paired(records, "base", seed=3), compare_paired(records, "base", seed=3)
    assert _by_method(first)["m"].questions == 4
    assert first == second


def test_an_unknown_base_is_refused_with_the_run_s_methods():
    with pytest.raises(BenchError, match=r"no record of the base method 'stok'.*'stock'"):
        compare_paired([_record(0, "stock", 10, 1.0)], "stok")


def test_the_command_reads_a_report_and_its_progress_file(tmp_path, capsys):
    records = [_record(q, "base", 100, 2.0) for q in range(3)] + [_record(q, "fast", 100, 1.0) for q in range(3)]
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"settings": {}, "records": [r.to_dict() for r in records]}))
    progress = tmp_path / "run.progress.jsonl"
    progress.write_text("\n".join([json.dumps({"settings": {}})] + [json.dumps(r.to_dict()) for r in records]) + "\n")
    assert load_records(report) == load_records(progress) == records
    assert main([str(report), "--base", "base"]) == 0
    fast_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("fast"))
    assert "total 2.000x" in fast_line and "faster in 3 of 3" in fast_line


def test_a_file_that_is_not_a_report_is_refused(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    with pytest.raises(BenchError, match="is not a bench report"):
        load_records(path)


def test_the_command_compares_the_questions_of_the_categories_asked_and_refuses_a_category_not_run(tmp_path, capsys):
    records = [_record(0, "base", 100, 2.0), _record(0, "fast", 100, 1.0)]
    records += [QuestionRecord(1, "math", m, [TurnRecord(0, 100, 1.0, None)]) for m in ("base", "fast")]
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"settings": {}, "records": [r.to_dict() for r in records]}))
    assert main([str(report), "--base", "base", "--categories", "math"]) == 0
    fast_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("fast"))
    assert "n=   1" in fast_line and "total 1.000x" in fast_line
    with pytest.raises(SystemExit):
        main([str(report), "--base", "base", "--categories", "maths"])
    assert "no question of --categories ['maths']; the run's are ['math', 'writing']" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # an unset shell variable named no category: it compared them all
        main([str(report), "--base", "base", "--categories", ""])
    assert "no question of --categories ['']" in capsys.readouterr().err


@pytest.mark.parametrize("broken", [{"question_id": 0, "category": "writing", "method": "m"},  # no turns
                                    {"question_id": 0, "category": "writing", "method": "m", "turns": [{"turn": 0}]},
                                    {"question_id": 0, "category": "writing", "method": "m",
                                     "turns": [{"turn": 0, "new_tokens": 5, "wall_time": 1.0, "identical": None,
                                                "speed": 3}]},
                                    "not a record"])
def test_a_malformed_record_is_refused_naming_the_file_and_line(tmp_path, capsys, broken):
    """A record missing a field, or with one no record has, was a KeyError or TypeError traceback."""
    good = _record(0, "base", 100, 2.0).to_dict()
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"settings": {}, "records": [good, broken]}))
    with pytest.raises(BenchError, match=rf"{report}: not a bench question record"):
        load_records(report)
    progress = tmp_path / "run.progress.jsonl"
    progress.write_text("\n".join(json.dumps(line) for line in ({"settings": {}}, good, broken)) + "\n")
    with pytest.raises(BenchError, match=rf"{progress}:3: not a bench question record"):
        load_records(progress)
    with pytest.raises(SystemExit):
        main([str(report), "--base", "base"])
    assert "not a bench question record" in capsys.readouterr().err


def test_too_few_resamples_for_an_interval_are_refused(tmp_path, capsys):
    """--resamples 1 printed an 'interval' whose ends were the same resample."""
    records = [_record(q, "base", 100, 2.0 + q) for q in range(3)] + [_record(q, "m", 100, 1.0) for q in range(3)]
    with pytest.raises(BenchError, match="resamples must be at least 41"):
        compare_paired(records, "base", resamples=40)  # its 97.5% point was the largest total
    assert compare_paired(records, "base", resamples=41)[1].low < compare_paired(records, "base", resamples=41)[1].high
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"settings": {}, "records": [r.to_dict() for r in records]}))
    with pytest.raises(SystemExit):
        main([str(report), "--base", "base", "--resamples", "1"])
    assert "--resamples must be at least 41" in capsys.readouterr().err


def test_the_fewest_resamples_put_both_ends_of_the_interval_inside_the_sorted_totals():
    from hf_adaptive_spec.bench.paired import MIN_RESAMPLES

    assert 0.025 * (MIN_RESAMPLES - 1) >= 1 > 0.025 * (MIN_RESAMPLES - 2)
    assert central_95(list(range(MIN_RESAMPLES))) == (1, MIN_RESAMPLES - 2)


def test_the_interval_drops_as_many_resamples_below_as_above():
    """The 97.5% point was the order statistic int(0.975 n): of 2000 totals it dropped 49 above and 50 below
    (numpy's percentile puts it at 0.975 (n - 1) = 1949.025)."""
    assert central_95(list(range(2000))) == (50, 1949)
    assert central_95(list(range(1000))) == (25, 974)


def test_a_question_the_method_answered_with_no_tokens_counts_as_slower_not_left_out():
    """The questions where the method spent a second for no tokens were left out of n, the total and the median: it
    printed 2.000x over 'faster in 2 of 2', where the report's own speedup (ratio of sums over every question) is
    0.667x; the median and 'faster in' are over the same questions as the total."""
    records = [_record(q, "base", 100, 1.0) for q in range(4)]
    records += [_record(q, "m", 0, 1.0) for q in range(2)] + [_record(q, "m", 100, 0.5) for q in range(2, 4)]
    m = _by_method(compare_paired(records, "base"))["m"]
    assert (m.questions, m.median, m.faster_in) == (4, 1.0, 2)
    assert m.total == pytest.approx((200 / 3.0) / (400 / 4.0))
    assert m.total == pytest.approx(summarize(records, reference="base")["m"].speedup)


def test_a_question_of_a_method_twice_is_refused_not_one_of_its_timings_kept():
    """Two records of one (question, method), as in two reports' records put together, kept the last without a word
    (0.444x from the 8 s record, 1.0x from the other)."""
    records = [_record(q, "base", 100, 2.0) for q in range(2)]
    records += [_record(0, "m", 100, 1.0), _record(0, "m", 100, 8.0), _record(1, "m", 100, 1.0)]
    with pytest.raises(BenchError, match=r"question 0 of 'm' is in 2 records; .*one run's report"):
        compare_paired(records, "base")


def test_a_question_whose_turns_differ_from_the_base_s_is_refused_not_compared_over_other_turns():
    """A record holding turn 0 only was set against the base's two turns: 6.000x for a method twice as fast."""
    two_turns = [TurnRecord(0, 100, 2.0, None), TurnRecord(1, 100, 10.0, None)]
    records = [QuestionRecord(0, "writing", "base", two_turns), _record(0, "m", 100, 1.0)]
    with pytest.raises(BenchError, match=r"question 0: 'm' has turns \[0\], the base 'base' \[0, 1\]"):
        compare_paired(records, "base")


@pytest.mark.parametrize("field, value", [("wall_time", None), ("wall_time", "1.0"), ("new_tokens", None),
                                          ("new_tokens", True)])
def test_a_record_with_no_number_of_tokens_or_seconds_is_refused_naming_the_file(tmp_path, capsys, field, value):
    """A turn with "wall_time": null stopped the command with a TypeError traceback from inside the sums."""
    broken = _record(0, "m", 100, 1.0).to_dict()
    broken["turns"][0][field] = value
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"settings": {}, "records": [_record(0, "base", 100, 2.0).to_dict(), broken]}))
    with pytest.raises(SystemExit):
        main([str(report), "--base", "base"])
    assert f"{report}: not a bench question record" in capsys.readouterr().err


def test_a_method_sharing_no_question_with_the_base_says_so_rather_than_printing_nan(tmp_path, capsys):
    """A method with no question in common with the base printed 'total nanx  median nanx  faster in 0 of 0'."""
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"settings": {}, "records": [_record(0, "base", 100, 2.0).to_dict(),
                                              _record(1, "m", 100, 1.0).to_dict()]}))
    assert main([str(report), "--base", "base"]) == 0
    m_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("m "))
    assert "nan" not in m_line and "n=   0  no question that 'base' also ran (with tokens)" in m_line


def test_the_peer_eager_float32_stock_is_a_base_as_in_the_report(tmp_path, capsys):
    """The report summarises the float32 answers timed beside stock's turns as 'stock-fp32' (the peer eager float32
    stock), but paired refused it as a base ('no record of the base method') and listed no ratio against it. Its
    records are of stock's session (timed right after its turns): not reported as measured apart."""
    def stock(q):
        turn = TurnRecord(0, 100, 2.0, None, fp32_reference_ids=list(range(100)), fp32_reference_seconds=4.0)
        return QuestionRecord(q, "writing", "stock", [turn], session=1)

    records = [stock(q) for q in range(3)] + [QuestionRecord(q, "writing", "fast", [TurnRecord(0, 100, 1.0, None)],
                                                             session=1) for q in range(3)]
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"settings": {}, "records": [r.to_dict() for r in records]}))
    assert main([str(report), "--base", "stock-fp32"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "total 4.000x" in lines["fast"] and "total 2.000x" in lines["stock"]
    assert "not interleaved" not in out
