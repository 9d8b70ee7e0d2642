#!/usr/bin/env bash
# Session 97, the same 2-core Intel Xeon with AVX512 and no bfloat16 matrix instructions as session 96: session 96's
# 13 x 1 run widened to Spec-Bench 13 x 5 (65 questions, 105 turns), 128 tokens, default buckets (session 96 gave its bfloat16 profile for bfloat16 methods only), interleaved per question, float32
# agreement on (eager float32 stock timed after each eager bfloat16 stock turn). Methods: compiled bfloat16 stock in
# caches sized per call (the peer), compiled float32 stock, the float32 profile's recommendation run in float32 (tree
# 2/4/8 + 4-token branch, +fp32) and issue 31's measure in float32 (the 16-node tree 6/8/16, no branch: tau without
# lookup, every token the float32 reference's). Session 96's bfloat16 methods are left out (1.24x and 1.18x there).
# About an hour alone; resumable (--resume) if stopped.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session97
NAME=$O/avx512_specbench13x5_compiled
METHODS="stock-compiled+sized,stock-compiled+sized+fp32,eagle3@2/4/8+lookup4+sized+fp32,eagle3@6/8/16+sized+fp32"
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 5 \
    --methods "$METHODS" --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 \
    --warmup 2 --num-threads 2 \
    --markdown $NAME.md --json $NAME.json "$@" > $NAME.log 2>&1
echo DONE >> $NAME.log
