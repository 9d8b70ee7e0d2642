#!/usr/bin/env bash
# Session 62: the eager float32 profile with the sizes timed in turn cycle by cycle inside each generate call and made
# non-decreasing (measure_verification_in_generate), then `profile`'s recommendation from the held-out recording (the
# shipped policies replayed against the best static tree, with and without the 4-token branch). About 15 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
P=$O/profile_fp32_eager_rotation.json
.venv/bin/hf-adaptive-spec profile --dtype float32 --num-threads 2 --context-length 256 --repeats 15 \
    --verify-tokens 1,2,4,6,8,12,16 --recording artifacts/replay/heldout-d6k4-shipped --lookup-tokens 0,4 \
    --json $P > $O/profile_fp32_eager_rotation.log 2>&1
