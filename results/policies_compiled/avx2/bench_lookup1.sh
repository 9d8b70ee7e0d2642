#!/usr/bin/env bash
# Session 51: is one prompt-lookup token without drafting (depth 0: the branch alone, verified in bucket 2) as fast
# as the drafter's tree 1/4/2 on the AVX2-only EPYC, as replay models (28.7 against 27.7 tok/s)? Interleaved,
# Spec-Bench 13 x 1, compiled bfloat16, buckets 2,3,4,8. About 17 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3+sized,eagle3@0/4/1+lookup+sized" --lookup_tokens 1 \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $O/profile_bf16_compiled_buckets2348.json \
    --markdown $O/lookup1_specbench13_bf16_compiled_avx2.md --json $O/lookup1_specbench13_bf16_compiled_avx2.json
