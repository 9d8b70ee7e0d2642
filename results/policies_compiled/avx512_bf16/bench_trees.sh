#!/usr/bin/env bash
# Session 64, after bench.sh (Spec-Bench 13 x 1: the retrained LTD 1.138x the profile's tree 2/4/8 + 4-token branch,
# paired median 1.084x, where the replay said 1.016x): the same policies on three questions per category, against
# the profile's tree and the two static trees whose tree + branch fits the 8-token bucket the policies mostly verify
# (2/4/4 and 1/4/4, the static grid's 2nd and a runner-up), so that "the best static tree" is the best of what ran
# live, not the replay's pick alone; transformers' +2/-1 schedule; the shipped RADAR as the candidate.
# Spec-Bench 13 x 3, 128 tokens, interleaved per question. About 35 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx512_bf16
NAME=$O/trees_specbench39_bf16_compiled_avx512
N=bf16-compiled-avx512
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 3 \
    --methods "stock-compiled+sized,eagle3+lookup+sized,eagle3@2/4/4+lookup+sized,eagle3@1/4/4+lookup+sized,eagle3-heuristic+lookup+sized,eagle3-ltd+lookup+sized,eagle3-radar+lookup+sized,eagle3-resps+lookup+sized,eagle3-candidate-policy+lookup+sized" \
    --ltd_policy artifacts/ltd-smollm2-$N --radar_policy artifacts/radar-smollm2-$N --resps_policy artifacts/resps-smollm2-$N \
    --candidate_policy hf_adaptive_spec/checkpoints/radar-smollm2-135m-instruct \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $O/profile_bf16_compiled_avx512.json "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
