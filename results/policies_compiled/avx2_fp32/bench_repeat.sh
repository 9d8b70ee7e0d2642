#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 56): bench.sh's static tree and RADAR again, alone with eager stock, on the
# same 13 Spec-Bench questions: how much a repeat moves the RADAR-to-tree ratio. About 12 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2_fp32
P=results/fast_path/avx2/profile_fp32_compiled_buckets8_12_16_32.json
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock,eagle3+lookup+sized,eagle3-radar+lookup+sized" \
    --compile --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P \
    --radar_policy artifacts/radar-smollm2-fp32-compiled \
    --markdown $O/radar_repeat_specbench13_fp32_compiled_avx2.md --json $O/radar_repeat_specbench13_fp32_compiled_avx2.json \
    > $O/radar_repeat_specbench13_fp32_compiled_avx2.log 2>&1
