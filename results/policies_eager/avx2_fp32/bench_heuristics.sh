#!/usr/bin/env bash
# Session 60, issue 32's adaptive baselines on the eager float32 curve: transformers' own heuristics as policies
# (eagle3-confidence: assistant_confidence_threshold 0.4 adapted on the ROC curve, chains up to 20; eagle3-heuristic:
# num_assistant_tokens_schedule="heuristic", chains from 20, +2/-1), each with the 4-token prompt-lookup branch,
# against the profile's static tree 2/4/9+4 and the shipped LTD policy, eager float32 stock the reference.
# Spec-Bench 13 x 1, 128 tokens, no compile. About 30 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
P=$O/profile_fp32_eager.json
NAME=$O/heuristics_specbench13_fp32_eager_avx2
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock,eagle3+lookup,eagle3-confidence+lookup,eagle3-heuristic+lookup,eagle3-ltd+lookup" \
    --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P \
    --markdown $NAME.md --json $NAME.json > $NAME.log 2>&1
