"""The float32 profile with its bucket costs refitted from a live bench run (run from the repository root):

    python results/policies_compiled/avx2_fp32/bench_fit.py     # writes profile_fp32_compiled_benchfit.json

Each speculative turn's verification time is fitted, least squares, as a per-question constant (its prefill) plus the
cycles it verified in each bucket times that bucket's cost; the profile's buckets get the fitted costs (its draft
step, catch-up table and verification curve are kept), so the replay can rank trees and policies on the curve the
bench ran on. Prints the fitted and the profiled costs.
"""

from __future__ import annotations

import json

import numpy as np

from hf_adaptive_spec.profiling import HardwareProfile

O = "results/policies_compiled/avx2_fp32"
BENCH = f"{O}/policies_specbench13_fp32_compiled_avx2.json"
PROFILE = "results/fast_path/avx2/profile_fp32_compiled_buckets8_12_16_32.json"


def bucket_counts(verified_tokens: list[int], profile: HardwareProfile) -> list[int]:
    """Cycles per bucket of ``profile`` (``HardwareProfile.bucket_for``: the smallest that holds the tree)."""
    buckets = list(profile.buckets)
    counts = [0] * len(buckets)
    for tokens in verified_tokens:
        counts[buckets.index(profile.bucket_for(tokens))] += 1
    return counts


def fitted_bucket_seconds(records: list[dict], profile: HardwareProfile) -> tuple[np.ndarray, float]:
    """Least-squares bucket costs (seconds) and the fit's root-mean-square residual over the speculative turns."""
    rows, times = [], []
    for record in records:
        for turn in record["turns"]:
            if turn.get("verified_tokens"):
                rows.append((record["question_id"], bucket_counts(turn["verified_tokens"], profile)))
                times.append(turn["verify_time"])
    questions = sorted({question for question, _ in rows})
    design = np.array([[float(question == q) for q in questions] + counts for question, counts in rows])
    coefficients, *_ = np.linalg.lstsq(design, np.array(times), rcond=None)
    residual = np.array(times) - design @ coefficients
    return coefficients[-len(profile.buckets):], float(np.sqrt((residual ** 2).mean()))


def main() -> None:
    profile = HardwareProfile.load(PROFILE)
    with open(BENCH, encoding="utf-8") as handle:
        records = json.load(handle)["records"]
    seconds, rms = fitted_bucket_seconds(records, profile)
    for bucket, fitted, profiled in zip(profile.buckets, seconds, profile.bucket_seconds):
        print(f"bucket {bucket:>3}: live {1000 * fitted:6.1f} ms per cycle, profiled {1000 * profiled:6.1f} ms")
    print(f"fit: rms residual {rms:.3f} s per turn")
    profile.bucket_seconds = [float(s) for s in seconds]
    profile.recommendation = None
    profile.save(f"{O}/profile_fp32_compiled_benchfit.json")


if __name__ == "__main__":
    main()
