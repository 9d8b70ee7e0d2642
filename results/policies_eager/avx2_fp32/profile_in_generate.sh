#!/usr/bin/env bash
# Session 59: the eager float32 profile again, each verification size now timed as generate verifies it (in turn,
# round after round; profile.sh's profile timed a bare forward size after size, which charged 4-6 tokens more than
# 12), then the shipped policies (retrain.sh's, trained on profile.sh's profile) replayed on it, on the held-out
# recording and on Spec-Bench 13 x 1's first turns (a recording of benchmark questions: evaluation only).
# About 15 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
P=$O/profile_fp32_eager_in_generate.json
.venv/bin/hf-adaptive-spec profile --dtype float32 --num-threads 2 --context-length 256 --repeats 15 \
    --verify-tokens 1,2,4,6,8,12,16 --recording artifacts/replay/heldout-d6k4-shipped --lookup-tokens 0,4 \
    --json $P > $O/profile_fp32_eager_in_generate.log 2>&1
for REC in heldout-d6k4-shipped specbench13-d6k4-shipped; do
    .venv/bin/python results/policies_compiled/replay_recommend.py --recording artifacts/replay/$REC --profile $P \
        --policy-name fp32-eager --curve cpu/float32/eager --lookup-tokens 4 > $O/replay_in_generate_$REC.log 2>&1
done
