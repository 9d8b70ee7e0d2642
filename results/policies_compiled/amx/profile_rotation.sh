#!/usr/bin/env bash
# Session 63: profile.sh again after the buckets are timed in turn inside each generate call (commit 255a619), with a
# 2-token bucket added (2,8,12,16,32), so that a cycle verifying the root alone (a policy's skip) is not padded to 8
# tokens. Same machine, drafter, cache and recording as profile.sh. About 12 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/amx
REC=artifacts/replay/heldout-d6k4-shipped
.venv/bin/hf-adaptive-spec profile --dtype bfloat16 --compile --num-threads 2 --context-length 256 --cache-slots 512 \
    --repeats 15 --verify-tokens 1,2,4,8,12,16,32 --buckets 2,8,12,16,32 --recording $REC --lookup-tokens 0,4 \
    --json $O/profile_bf16_compiled_amx_rotation_b2.json > $O/profile_bf16_compiled_amx_rotation_b2.log 2>&1
