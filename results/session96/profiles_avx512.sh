#!/usr/bin/env bash
# Session 96, a 2-core Intel Xeon whose PyTorch reports AVX512 without AVX512-BF16 or AMX (the first machine of this
# kind in these results; cost_curve.NO_BFLOAT16_MATRIX assumed it converts bfloat16 and multiplies in float32, as the
# AVX2-only EPYC does). The compiled curve in bfloat16, then in float32, each with the held-out recording (24 first
# turns, recorded in float32 by record_heldout24.log's command) ranking every tree with and without a prompt-lookup
# branch, in small and default buckets alike. About 40 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session96
REC=artifacts/replay/heldout-d6k4-shipped
for dtype in ${DTYPES:-bfloat16 float32}; do
    .venv/bin/hf-adaptive-spec profile --dtype "$dtype" --compile --num-threads 2 --context-length 256 \
        --cache-slots 512 --repeats 15 --verify-tokens 1,2,4,8,12,16,32 --buckets 2,3,5,8,12,16,32 \
        --recording $REC --lookup-tokens 0,1,4 \
        --json "$O/profile_${dtype}_compiled_avx512.json" > "$O/profile_${dtype}_compiled_avx512.log" 2>&1
done
