#!/usr/bin/env bash
# Session 96, a 2-core Intel Xeon with AVX512 and no bfloat16 matrix instructions (profiles_avx512.sh): what a user
# gets here. Spec-Bench 13 x 1, 128 tokens, interleaved per question, float32 agreement on (eager float32 stock timed
# after each eager bfloat16 stock turn): compiled bfloat16 stock in caches sized per call (the peer) and compiled
# float32 stock; the bfloat16 profile's recommendation (LookupFirstPolicy 1/4/3 + 4-token branch in its buckets); the
# float32 profile's recommendation run in float32 (tree 2/4/8 + 4-token branch, +fp32: the run's float32 copy of the
# model, the default buckets, where the tree with its branch takes bucket 12 as it was ranked); and the package's
# default policy for compiled bfloat16 without a profile (the shipped LTD, trained on the AVX-512 bfloat16 EPYC's
# curve, reported so). About 40 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session96
NAME=$O/avx512_specbench13_compiled
METHODS="stock-compiled+sized,stock-compiled+sized+fp32,eagle3-lookup-first+lookup+sized"
METHODS+=",eagle3@2/4/8+lookup4+sized+fp32,eagle3-ltd+lookup+sized"
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "$METHODS" --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 \
    --warmup 2 --num-threads 2 --tree_profile $O/profile_bfloat16_compiled_avx512.json \
    --markdown $NAME.md --json $NAME.json > $NAME.log 2>&1
echo DONE >> $NAME.log
