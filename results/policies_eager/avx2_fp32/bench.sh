#!/usr/bin/env bash
# Session 58, the eager float32 curve on the AVX2-only EPYC with the shipped stage-15 drafter: eager float32 stock,
# the static tree profile.sh recommends (2/4/9 with the 4-token branch) and the three learned policies with the same
# branch, Spec-Bench 13 x 1, 128 tokens, no compile. POLICIES=shipped (default): the package's default policies
# (session 58's shipped_* run: the stage-4 ones; since session 59 the retrained ones); POLICIES=retrained:
# retrain.sh's artifacts, trained for this drafter on this curve (shipped since session 59).
# About 20 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
P=$O/profile_fp32_eager.json
WHICH=${POLICIES:-shipped}
ARGS=()
if [ "$WHICH" = retrained ]; then
    ARGS=(--ltd_policy artifacts/ltd-smollm2-fp32-eager --radar_policy artifacts/radar-smollm2-fp32-eager
          --resps_policy artifacts/resps-smollm2-fp32-eager)
fi
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock,eagle3+lookup,eagle3-ltd+lookup,eagle3-radar+lookup,eagle3-resps+lookup" \
    --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P "${ARGS[@]}" \
    --markdown $O/${WHICH}_specbench13_fp32_eager_avx2.md --json $O/${WHICH}_specbench13_fp32_eager_avx2.json \
    > $O/${WHICH}_specbench13_fp32_eager_avx2.log 2>&1
