#!/usr/bin/env bash
# Session 81, a 2-core Intel Xeon with AMX: the shipped configuration after the session's host-traffic changes to the
# decoding path (e9b85d1 and the core uploads), interleaved per question against transformers' fast path in caches
# sized per call (stock-compiled+sized, the reference), eager bfloat16 stock and eager float32 stock (the float32
# agreement's reference, timed after stock's turn): LookupFirstPolicy 2/4/8 + branch (the README's fastest
# configuration) and the shipped LTD and RADAR with the branch, in the README's buckets 2,5,8,12,16,32, with this
# machine's profile. Spec-Bench 13 x PER (default 1), 128 tokens; RESUME=1 continues the progress file.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session81
NAME=$O/specbench13_bf16_compiled_amx
PER=${PER:-1}
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category $PER \
    --methods "stock,stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-ltd+lookup+sized,eagle3-radar+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json \
    --verify_buckets 2,5,8,12,16,32 "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
