#!/usr/bin/env bash
# Session 62: issue 32's MT-bench row on the eager float32 curve. One question per MT-bench category (8 questions, two
# turns each), 128 tokens, every method interleaved per question and checked against eager float32 stock: the static
# tree the profile recommends (2/4/9; profile_rotation.sh's profile), the one the bench-fitted profile recommends
# (2/4/7), transformers' +2/-1 length schedule (the better heuristic on Spec-Bench, session 60), and the three shipped
# policies, each speculative method with the 4-token prompt-lookup branch. About 35 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
NAME=$O/policies_mtbench8_fp32_eager_avx2
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/mt_bench/question.jsonl --per-category 1 \
    --methods "stock,eagle3+lookup,eagle3@2/4/7+lookup,eagle3-heuristic+lookup,eagle3-ltd+lookup,eagle3-radar+lookup,eagle3-resps+lookup" \
    --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $O/profile_fp32_eager_rotation.json "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
