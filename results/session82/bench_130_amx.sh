#!/usr/bin/env bash
# Session 82, a 2-core Intel Xeon with AMX: issue 31's measurement on this machine kind, Spec-Bench 13 x 10 (it had
# 13 x 1 only: 1.93x and 2.02x in two runs): LookupFirstPolicy 2/4/8 + branch (the README's fastest configuration)
# against transformers' fast path in caches sized per call (stock-compiled+sized, the reference) and eager bfloat16
# stock, interleaved per question, in the README's buckets 2,5,8,12,16,32 with this machine kind's profile; 128
# tokens, no float32 agreement (an eager float32 generation per turn: ~25 minutes more; sessions 81 and 82 measured
# it at 0.55 on 13 x 1). About 40 minutes alone. RESUME=1 continues the progress file.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session82
NAME=$O/specbench130_bf16_compiled_amx
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 10 \
    --methods "stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized" --no_fp32_agreement \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json \
    --verify_buckets 2,5,8,12,16,32 "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
