#!/usr/bin/env bash
# Session 94, a 2-core Intel Xeon with AMX: issue 32's measurement again now that transformers' heuristics are
# transformers' at their defaults (session 93: eagle3-heuristic has its 0.4 confidence gate, the threshold restarts
# each call). Spec-Bench 13 x 10 (its first 80 questions are MT-bench's 80: `paired --categories` gives MT-bench),
# interleaved per question: the peer stock-compiled+sized; the best static tree, LookupFirstPolicy 2/4/8 + 4-token
# branch (this machine's profile); both heuristics with the branch; the shipped lookup-first LTD and RADAR.
# 128 tokens, compiled bfloat16, caches sized per call, the profile's buckets, float32 agreement off.
# About 70 minutes alone. PER_CATEGORY (default 10); RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session94
NAME=$O/issue32_specbench130_bf16_compiled_amx
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
METHODS="stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-heuristic+lookup+sized"
METHODS+=",eagle3-confidence+lookup+sized,eagle3-ltd+lookup+sized,eagle3-radar+lookup+sized"
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl \
    --per-category "${PER_CATEGORY:-10}" --methods "$METHODS" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json \
    --verify_buckets 2,5,8,12,16,32 --no_fp32_agreement "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
