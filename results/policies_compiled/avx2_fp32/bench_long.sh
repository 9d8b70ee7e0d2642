#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 57): the static tree against RADAR on Spec-Bench 13 x 3 (39 questions, the first
# three of each category), with eager stock as the reference: does RADAR's 1.02-1.03x lead of session 56 hold on a longer run? About 40 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2_fp32
P=results/fast_path/avx2/profile_fp32_compiled_buckets8_12_16_32.json
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 3 \
    --methods "stock,eagle3+lookup+sized,eagle3-radar+lookup+sized" \
    --compile --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P \
    --radar_policy artifacts/radar-smollm2-fp32-compiled \
    --markdown $O/radar_long_specbench39_fp32_compiled_avx2.md --json $O/radar_long_specbench39_fp32_compiled_avx2.json \
    > $O/radar_long_specbench39_fp32_compiled_avx2.log 2>&1
