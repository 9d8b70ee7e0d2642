#!/usr/bin/env bash
# Session 63, a 2-core Intel Xeon with AMX: issue 31's and 32's rows on the compiled bfloat16 path, in one interleaved
# run against transformers' own fast path in caches sized per call (stock-compiled+sized, the reference) and eager
# float32 stock (stock+fp32): the profile's tree (profile.sh: 2/4/8) with and without the 4-token prompt-lookup branch,
# transformers' +2/-1 length schedule, and the three shipped policies (trained on the AVX2 EPYC's eager float32 curve:
# each call reports it). Every bfloat16 answer is compared with the eager float32 stock answer (fp32 agreement).
# Spec-Bench 13 x PER (default 1), 128 tokens; RESUME=1 continues the progress file.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/amx
NAME=$O/specbench13_bf16_compiled_amx
PER=${PER:-1}
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category $PER \
    --methods "stock-compiled+sized,stock+fp32,eagle3+sized,eagle3+lookup+sized,eagle3-heuristic+lookup+sized,eagle3-ltd+lookup+sized,eagle3-radar+lookup+sized,eagle3-resps+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $O/profile_bf16_compiled_amx.json "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
