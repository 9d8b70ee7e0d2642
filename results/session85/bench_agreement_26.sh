#!/usr/bin/env bash
# Session 85, the AVX-512 bfloat16 AMD EPYC (2 cores): float32 agreement of the compiled bfloat16 path on the decoding
# path as it stands (after 854188b's reads for accelerators), which session 84's 13 x 10 left off. The README's
# fastest configuration, LookupFirstPolicy 2/4/8 + 4-token branch, against transformers' fast path in caches sized
# per call (stock-compiled+sized, the reference), eager bfloat16 stock (`stock`) and eager float32 stock (the
# agreement reference, timed as `stock-fp32`), interleaved per question, in this machine kind's profile buckets
# 2,5,8,12,16,32, 128 tokens, Spec-Bench 13 x 2 (the first two questions of each category). About 25 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session85
NAME=$O/specbench26_agreement_bf16_compiled_epyc
P=results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512_bucket5.json
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 2 \
    --methods "stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $P "${RESUME_ARGS[@]}" --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
