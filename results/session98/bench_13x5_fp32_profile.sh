#!/usr/bin/env bash
# Session 98, the AVX-512 Xeon kind of sessions 96-97 (no AVX512-BF16, no AMX): session 97's Spec-Bench 13 x 5 run
# (65 questions, 105 turns, 128 tokens, interleaved per question, caches sized per call, float32 agreement on) with
# this session's float32 profile's recommendation (profile_fp32.sh: LookupFirstPolicy 2/4/5 + the 4-token branch,
# ranked in buckets 2,3,5,8,12,16,32) beside session 97's float32 engine (tree 2/4/8 + branch, session 96's
# profile), both on the float32 copy in the profile's buckets (--fp32_verify_buckets; 2/4/8 + branch verifies 8 or
# 12 tokens there, as in the default buckets). The peer: compiled bfloat16 stock. About 45 minutes alone;
# resumable (--resume).
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session98
NAME=$O/avx512_specbench13x5_fp32_profile
METHODS="stock-compiled+sized,stock-compiled+sized+fp32,eagle3@2/4/8+lookup4+sized+fp32"
METHODS+=",eagle3-lookup-first@2/4/5+lookup4+sized+fp32"
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 5 \
    --methods "$METHODS" --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 \
    --warmup 2 --num-threads 2 --fp32_verify_buckets 2,3,5,8,12,16,32 \
    --markdown $NAME.md --json $NAME.json "$@" > $NAME.log 2>&1
echo DONE >> $NAME.log
