#!/usr/bin/env bash
# The eager float32 profile with its verification curve fitted from this machine's own bench runs (session 61):
# every speculative turn of the five eager runs of sessions 58-60 (run B's 13 questions are inside the 39-question
# file), each turn's verify time counted in eager stock's seconds per token in the same question and turn, fitted as
# f(1) = a, f(n >= 2) = a + b + c (n - 2); one token keeps profile_in_generate.sh's measured time, drafting and
# catch-up stay its measurements. Seconds; not a timing run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
.venv/bin/python examples/profile_from_bench.py --curve linear --like $O/profile_fp32_eager_in_generate.json \
    --output $O/profile_fp32_eager_fitted.json --bench \
    $O/retrained_specbench39_fp32_eager_avx2.progress.jsonl $O/shipped_nolookup_specbench13_fp32_eager_avx2.progress.jsonl \
    $O/heuristics_specbench13_fp32_eager_avx2.progress.jsonl $O/shipped_specbench13_fp32_eager_avx2.progress.jsonl \
    $O/retrained_run_a_specbench13_fp32_eager_avx2.progress.jsonl | tee $O/profile_fp32_eager_fitted.log
