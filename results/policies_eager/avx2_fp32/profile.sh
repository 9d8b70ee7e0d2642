#!/usr/bin/env bash
# The eager float32 curve on the AVX2-only EPYC (session 58), with the shipped stage-15 drafter: the curve the shipped
# policies (trained on the stage-4 drafter's eager profile, another EPYC) are the default for. The dynamic cache, no
# compile; a later draft level timed apart from the first (session 57's measure); replay on the float32 held-out
# recording with the prompt-lookup branch at 0, 1, 2 and 4 tokens. About 20 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
.venv/bin/hf-adaptive-spec profile --dtype float32 --num-threads 2 --context-length 256 --repeats 15 \
    --verify-tokens 1,2,4,6,8,12,16 --recording artifacts/replay/heldout-d6k4-shipped --lookup-tokens 0,1,2,4 \
    --json $O/profile_fp32_eager.json > $O/profile_fp32_eager.log 2>&1
