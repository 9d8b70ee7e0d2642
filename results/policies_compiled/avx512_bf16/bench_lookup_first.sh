#!/usr/bin/env bash
# Session 67, the AVX-512 bfloat16 EPYC: does LTD with `lookup_first=True` (a matched prompt-lookup chain verified
# alone, nothing drafted; the heads decide the other cycles), trained on the 48-conversation 2-turn held-out
# recording, run at least as fast as the best static tree of session 66, LookupFirstPolicy 2/4/8 + 4-token branch?
# Spec-Bench 13 x 10, 128 tokens, compiled bfloat16, caches sized per call, interleaved per question, fp32 agreement on:
#   the peer stock-compiled+sized; LookupFirstPolicy 2/4/8 + branch; the shipped LTD variant; the lookup-first LTD
#   (candidate policy). About 60 minutes alone. RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx512_bf16
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
METHODS="stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-ltd+lookup+sized,eagle3-candidate-policy+lookup+sized"
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 10 --methods "$METHODS" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $O/profile_bf16_compiled_avx512.json \
    --candidate_policy artifacts/ltd-smollm2-bf16-compiled-avx512-lookup-first-48 \
    "${RESUME_ARGS[@]}" --markdown $O/lookup_first_specbench130_bf16_compiled_avx512.md \
    --json $O/lookup_first_specbench130_bf16_compiled_avx512.json >> $O/lookup_first_specbench130_bf16_compiled_avx512.log 2>&1
echo DONE
