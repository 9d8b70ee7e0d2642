#!/usr/bin/env bash
# Issue 32 live on the AVX2-only EPYC (session 51): the profile's static tree (1/4/2 in buckets 2,3,4,8), transformers'
# heuristics and the three policies trained by run.sh, interleaved, Spec-Bench 13 x 1 (about 35 minutes), compiled bfloat16. Run alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3+sized,eagle3-heuristic+sized,eagle3-confidence+sized,eagle3-ltd+sized,eagle3-resps+sized,eagle3-radar+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $O/profile_bf16_compiled_buckets2348.json \
    --ltd_policy artifacts/ltd-smollm2-small-buckets --resps_policy artifacts/resps-smollm2-small-buckets \
    --radar_policy artifacts/radar-smollm2-small-buckets \
    --markdown $O/policies_specbench13_bf16_compiled_avx2.md --json $O/policies_specbench13_bf16_compiled_avx2.json
