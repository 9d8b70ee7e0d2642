#!/usr/bin/env bash
# Session 61: what the fitted eager profile (profile_fitted.sh) predicts, live, in one interleaved run: eager float32
# stock, the static tree the measured profile recommends (2/4/9, eagle3+lookup), the one the fitted profile recommends
# (2/4/7), the shipped LTD and RADAR, and RADAR retrained on the fitted profile (retrain.sh with
# PROFILE=$O/profile_fp32_eager_fitted.json NAME=fp32-fitted LOOKUP=4; eagle3-candidate-policy), every speculative
# method with the 4-token branch. Spec-Bench 13 x PER (default 1), 128 tokens,
# no compile. RESUME=1 continues the progress file (e.g. with PER=2). About 30 minutes per 13 questions, alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
NAME=$O/fitted_specbench13_fp32_eager_avx2
PER=${PER:-1}
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category $PER \
    --methods "stock,eagle3+lookup,eagle3@2/4/7+lookup,eagle3-ltd+lookup,eagle3-radar+lookup,eagle3-candidate-policy+lookup" \
    --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $O/profile_fp32_eager.json --candidate_policy artifacts/radar-smollm2-fp32-fitted \
    "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
