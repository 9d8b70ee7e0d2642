#!/usr/bin/env bash
# Session 55 on the AVX2-only EPYC: the float32 compiled curve profiled with the held-out recording (recorded in
# float32, so its trees are the float32 engine's), the default buckets 8,12,16,32 and the prompt-lookup branch ranked:
# what hf-adaptive-spec would recommend for the float32 engine here (issue 32's next lever: policies on this curve).
# Needs run.sh's recording (artifacts/replay/heldout-d6k4-shipped). About 20 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/fast_path/avx2
.venv/bin/hf-adaptive-spec profile --dtype float32 --compile --num-threads 2 --context-length 256 \
    --cache-slots 512 --repeats 15 --verify-tokens 1,2,4,8,12,16,32 --buckets 8,12,16,32 \
    --recording artifacts/replay/heldout-d6k4-shipped --lookup-tokens 0,1,2,4 \
    --json $O/profile_fp32_compiled_buckets8_12_16_32.json > $O/profile_fp32_compiled.log 2>&1
