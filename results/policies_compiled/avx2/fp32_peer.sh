#!/usr/bin/env bash
# Session 54 on the AVX2-only EPYC: the profile's recommendation against both peers in one interleaved run, eager
# float32 stock now among them (the row stock-fp32: the float32 agreement answers, timed right after stock's turn).
# Same settings as last_row_head.sh, on the catch-up profile, without the tree 1/4/2. About 25 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2
P=$O/profile_bf16_compiled_buckets2348_catch_up.json
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3-lookup-first+lookup+sized,eagle3@0/4/1+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $P \
    --markdown $O/fp32_peer_specbench13_bf16_compiled_avx2.md --json $O/fp32_peer_specbench13_bf16_compiled_avx2.json \
    > $O/fp32_peer_specbench13_bf16_compiled_avx2.log 2>&1
