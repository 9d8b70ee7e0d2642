#!/usr/bin/env bash
# Session 63, a 2-core Intel Xeon with AMX (bfloat16 matrix instructions): the compiled bfloat16 curve in caches of
# 512 slots (the engine sizes its own caches so), the default buckets, the shipped stage-15 drafter, and the replay of
# the held-out recording (the eager float32 one of the shipped drafter; 24 prompts) with and without the 4-token
# prompt-lookup branch: which tree and shipped policy fit this machine. About 15 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/amx
REC=artifacts/replay/heldout-d6k4-shipped
.venv/bin/hf-adaptive-spec profile --dtype bfloat16 --compile --num-threads 2 --context-length 256 --cache-slots 512 \
    --repeats 15 --verify-tokens 1,2,4,8,12,16,32 --recording $REC --lookup-tokens 0,4 \
    --json $O/profile_bf16_compiled_amx.json > $O/profile_bf16_compiled_amx.log 2>&1
