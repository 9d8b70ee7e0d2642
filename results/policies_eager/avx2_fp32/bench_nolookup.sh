#!/usr/bin/env bash
# Session 60: the shipped policies (trained with the 4-token prompt-lookup branch, session 58's retrain.sh) run
# WITHOUT the branch, against the static tree the eager profile ranks best without it (2/4/9, as with it), eager
# float32 stock as the reference. Spec-Bench 13 x 1, 128 tokens, no compile. The engine reports each policy as
# trained with another branch (out.speculation.policy_lookup_mismatch); the markdown shows it under the table.
# About 25 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
P=$O/profile_fp32_eager.json
NAME=$O/shipped_nolookup_specbench13_fp32_eager_avx2
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock,eagle3,eagle3-ltd,eagle3-radar,eagle3-resps" \
    --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P \
    --markdown $NAME.md --json $NAME.json > $NAME.log 2>&1
