#!/usr/bin/env bash
# Session 82, a 2-core Intel Xeon with AMX: the shipped Re-SpS (not measured on this machine kind before) against the
# README's fastest configuration, LookupFirstPolicy 2/4/8 + branch, interleaved per question against transformers'
# fast path in caches sized per call (stock-compiled+sized, the reference), in the README's buckets 2,5,8,12,16,32
# with this machine's profile, as results/session81/bench_amx.sh ran LTD and RADAR. Spec-Bench 13 x PER (default 1),
# 128 tokens; RESUME=1 continues the progress file.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session82
NAME=$O/specbench13_resps_bf16_compiled_amx
PER=${PER:-1}
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category $PER \
    --methods "stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-resps+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json \
    --verify_buckets 2,5,8,12,16,32 "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
