#!/usr/bin/env bash
# Session 87 (run in session 88, which drew a 2-core Intel Xeon with AMX): the decoding path after session 87's changes
# (the model's mode checked per call, transformers' assisted settings compared per call, the fast path's module
# settings compared per call, the static tree's saved settings and the bench's option checks), none of which should
# change what a cycle computes: session 82's AMX command (results/session82/bench_resps_amx.sh) without Re-SpS, on
# Spec-Bench 13 x 1, to compare tokens turn by turn with session 82's run (results/session84/same_tokens.py) and the
# ratios. About 12 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session87
NAME=$O/specbench13_agreement_bf16_compiled_amx
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json \
    --verify_buckets 2,5,8,12,16,32 "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
