#!/usr/bin/env bash
# Session 86, the AVX-512 bfloat16 AMD EPYC (2 cores): the decoding path after this session's changes (a caller's
# logits processors asked as stock asks them, policy settings checked per call, the eager head's row-sum check),
# none of which the bench's greedy methods exercise beyond a check per call: session 85's command
# (results/session85/bench_agreement_26.sh) on Spec-Bench 13 x 1 (the first question of each category), to compare
# tokens turn by turn with session 85's run (results/session84/same_tokens.py) and the ratios. About 13 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session86
NAME=$O/specbench13_agreement_bf16_compiled_epyc
P=results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512_bucket5.json
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $P "${RESUME_ARGS[@]}" --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
