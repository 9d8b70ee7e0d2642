#!/usr/bin/env bash
# The compiled cost curve at small verification buckets on this AVX2-only machine (session 50), float32 then
# bfloat16: what `profile --buckets` times and what a tree of 2-4 tokens costs here. Run alone on the machine.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=results/fast_path/avx2
for dtype in float32 bfloat16; do
    .venv/bin/hf-adaptive-spec profile --dtype "$dtype" --compile --eagle3 hf_adaptive_spec/checkpoints/eagle3-smollm2-135m-instruct \
        --num-threads 2 --context-length 256 --cache-slots 512 --repeats 15 --verify-tokens 1,2,3,4,8 --buckets 2,3,4,8 \
        --json "$OUT/profile_${dtype}_compiled_buckets2348.json"
done
