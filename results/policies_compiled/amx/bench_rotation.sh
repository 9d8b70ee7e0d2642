#!/usr/bin/env bash
# Session 63 (written, not run yet: it needs an AMX machine; session 64 ran on an AVX-512 EPYC): what
# profile_rotation.sh's profile predicts, live. Its buckets (2,8,12,16,32: a cycle
# verifying the root alone no longer pads to 8 tokens) for every engine method; its tree 1/4/5 and the default 2/4/8,
# each with the 4-token branch; the shipped LTD (which skips); against stock-compiled+sized. Spec-Bench 13 x 1,
# 128 tokens, interleaved. About 20 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/amx
NAME=$O/rotation_b2_specbench13_bf16_compiled_amx
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3+lookup+sized,eagle3@2/4/8+lookup+sized,eagle3-ltd+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $O/profile_bf16_compiled_amx_rotation_b2.json "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
