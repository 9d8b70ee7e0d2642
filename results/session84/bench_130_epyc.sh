#!/usr/bin/env bash
# Session 84, the AVX-512 bfloat16 AMD EPYC (2 cores): issue 31's Spec-Bench 13 x 10 on the decoding path after
# 854188b (the acceptance walk's and the stopping criteria's reads for accelerators; on the CPU the walk still reads
# row by row and the criteria are asked about a cycle's tokens before one read). The README's fastest configuration,
# LookupFirstPolicy 2/4/8 + 4-token branch, against transformers' fast path in caches sized per call
# (stock-compiled+sized, the reference) and eager bfloat16 stock (the bench's `stock` row), interleaved per
# question, in this machine kind's profile buckets 2,5,8,12,16,32 (session 69's profile_bf16_compiled_avx512_bucket5),
# 128 tokens, float32 agreement off (session 68 measured it on 13 x 10 here: 0.63-0.64). The same configuration as
# session 70's row for LookupFirstPolicy (results/policies_compiled/avx512_bf16/bucket5_specbench130_*). About 50
# minutes alone. RESUME=1 continues the progress file.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session84
NAME=$O/specbench130_bf16_compiled_epyc
P=results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512_bucket5.json
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 10 \
    --methods "stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized" --no_fp32_agreement \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $P "${RESUME_ARGS[@]}" --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
