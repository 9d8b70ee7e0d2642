"""Summary math on hand-made records: ratio of mean throughputs, medians, τ, identity, time split."""

from __future__ import annotations

import pytest
import torch

from hf_adaptive_spec.bench.report import build_report
from hf_adaptive_spec.bench.summary import summarize

from .bench_fakes import hand_made_records, record, turn


def test_speedup_is_the_ratio_of_total_throughputs_and_median_is_per_question():
    summary = summarize(hand_made_records())
    assert summary["stock"].throughput == pytest.approx(50 / 9)
    assert summary["fast"].throughput == pytest.approx(20.0)
    assert summary["fast"].speedup == pytest.approx(20.0 / (50 / 9))  # 3.6, not the mean ratio 3.33
    assert summary["fast"].median_speedup == pytest.approx(2.0)
    assert summary["stock"].speedup == pytest.approx(1.0)
    assert (summary["fast"].new_tokens, summary["fast"].turns, summary["fast"].questions) == (50, 4, 3)


def test_identity_flag_and_mismatch_count():
    summary = summarize(hand_made_records())
    assert summary["stock"].identical is True
    assert summary["fast"].identical is False
    assert summary["fast"].mismatched_turns == 1


def test_tau_time_split_and_histogram_from_speculation_stats():
    fast = summarize(hand_made_records())["fast"]
    # accepted lengths 2, 0, 3, 3, 3, 1: 6 cycles, 12 accepted -> (6 + 12) / 6
    assert fast.mean_accepted_tokens == pytest.approx(3.0)
    assert fast.mean_accepted_tokens_source == "speculation_stats"
    assert fast.accepted_length_histogram == [1, 1, 1, 3]
    assert fast.time_split == pytest.approx({"draft": 0.4, "verify": 0.8, "policy": 0.2, "other": 2.5 - 1.4})


def test_tau_from_target_passes_when_no_stats():
    records = [record(1, "stock", turn(12, 1.0, target_passes=12)), record(1, "lookup", turn(12, 0.5, target_passes=4))]
    summary = summarize(records)
    assert summary["lookup"].mean_accepted_tokens == pytest.approx(3.0)
    assert summary["lookup"].mean_accepted_tokens_source == "target_passes"
    assert summary["stock"].mean_accepted_tokens == pytest.approx(1.0)
    assert summary["lookup"].time_split is None and summary["lookup"].accepted_length_histogram is None


def test_no_stock_means_no_speedup():
    summary = summarize([record(1, "fast", turn(5, 1.0))])
    assert summary["fast"].speedup is None and summary["fast"].median_speedup is None
    assert summary["fast"].mean_accepted_tokens is None


def test_report_breaks_down_by_category_against_stock_in_that_category():
    report = build_report(hand_made_records(), {"model": "m"}, device=torch.device("cpu"))
    fast = report["summary"]["fast"]
    assert set(fast) >= {"mean_accepted_tokens", "speedup", "identical", "throughput", "median_speedup", "time_split"}
    assert fast["categories"]["math"]["speedup"] == pytest.approx(6.0)
    assert fast["categories"]["writing"]["speedup"] == pytest.approx((20 / 1.5) / (20 / 3.0))
    assert fast["categories"]["writing"]["identical"] is False
    assert fast["categories"]["math"]["identical"] is True
    assert len(report["records"]) == 6 and report["records"][0]["turns"][0]["throughput"] == pytest.approx(10.0)


def test_unchecked_turns_leave_identity_unknown_not_true():
    records = [record(1, "stock", turn(5, 1.0, identical=None)), record(1, "fast", turn(5, 0.5, identical=None))]
    summary = summarize(records)
    assert summary["fast"].identical is None and summary["fast"].mismatched_turns == 0
    assert summary["fast"].speedup == pytest.approx(2.0)


def test_reference_speedup_keeps_speedup_vs_stock():
    summary = summarize(hand_made_records(), reference="fast")
    assert summary["fast"].speedup == pytest.approx(1.0)
    assert summary["stock"].speedup == pytest.approx((50 / 9) / 20.0)
    assert summary["fast"].speedup_vs_stock == pytest.approx(20.0 / (50 / 9))
    assert summary["stock"].reference == "fast"


def test_fp32_agreement_is_a_mean_over_turns_and_compile_time_is_counted_apart():
    records = [
        record(1, "stock", turn(10, 1.0, fp32_agreement=1.0, fp32_identical=True)),
        record(2, "stock", turn(10, 1.0, fp32_agreement=0.5, fp32_identical=False)),
        record(1, "fast", turn(10, 0.5, fp32_agreement=0.25, fp32_identical=False, compile_time=3.0)),
        record(2, "fast", turn(10, 0.5, fp32_agreement=1.0, fp32_identical=True, compile_time=0.0)),
    ]
    warmup = {"fast": [[12.0, 2.0], [5.0, 2.5]]}  # fast: two cache lengths warmed up; eager methods: none kept
    summary = summarize(records, warmup_seconds=warmup)
    assert summary["stock"].fp32_agreement == pytest.approx(0.75) and summary["stock"].fp32_identical_share == 0.5
    assert summary["fast"].fp32_agreement == pytest.approx(0.625)
    assert summary["fast"].compile_seconds == pytest.approx(10.0 + 2.5 + 3.0)
    assert summary["stock"].compile_seconds is None  # an eager method compiles nothing: no column value
    one_call = summarize(records, warmup_seconds={"fast": [[12.0], [5.0]]})["fast"]
    assert one_call.compile_seconds is None  # a single warm-up call holds the compile and nothing to subtract
    assert summarize(hand_made_records())["fast"].fp32_agreement is None  # float32 runs: not measured


def test_the_float32_answers_timed_beside_stock_are_the_row_stock_fp32():
    fp32 = {"fp32_agreement": 1.0, "fp32_identical": True}
    records = [
        record(1, "stock", turn(10, 1.0, fp32_reference_ids=[1] * 12, fp32_reference_seconds=2.0, **fp32)),
        record(2, "stock", turn(10, 1.0, fp32_reference_ids=[1] * 8, fp32_reference_seconds=2.0, **fp32)),
        record(1, "fast", turn(10, 0.5, **fp32)),
        record(2, "fast", turn(10, 0.5, **fp32)),
        record(3, "stock", turn(10, 1.0)),  # a turn without the float32 time (an older run): no row for it
        record(3, "fast", turn(10, 0.5)),
    ]
    summary = build_report(records, {}, torch.device("cpu"))["summary"]
    assert summary["stock-fp32"]["questions"] == 2 and summary["stock-fp32"]["throughput"] == pytest.approx(20 / 4.0)
    assert summary["stock-fp32"]["speedup"] == pytest.approx(5.0 / 10.0)  # against stock on questions 1 and 2
    assert summary["fast"]["speedup"] == pytest.approx(2.0)
    assert "stock-fp32" not in build_report(hand_made_records(), {}, torch.device("cpu"))["summary"]  # float32 runs


def test_a_question_the_reference_lacks_counts_on_neither_side_of_the_speedup():
    """The method's tokens/s was totalled over all its questions and the reference's over those both ran: a fast
    question the reference lacks made 2x read 3.33x."""
    records = [record(1, "stock", turn(100, 1.0)), record(1, "fast", turn(100, 0.5)), record(2, "fast", turn(100, 0.1))]
    summary = summarize(records)
    assert summary["fast"].speedup == pytest.approx(2.0) and summary["fast"].speedup_vs_stock == pytest.approx(2.0)
    assert summary["fast"].median_speedup == pytest.approx(2.0)


def test_the_fp32_identical_share_is_over_the_turns_the_agreement_is_over():
    """The share divided by every turn while the agreement averaged the turns compared: agreement 1.0 beside
    '50% identical' for a method identical wherever it was compared."""
    compared = turn(10, 1.0, fp32_agreement=1.0, fp32_identical=True)
    records = [record(1, "stock", compared), record(2, "stock", turn(10, 1.0))]
    stock = summarize(records)["stock"]
    assert stock.fp32_agreement == pytest.approx(1.0) and stock.fp32_identical_share == pytest.approx(1.0)
