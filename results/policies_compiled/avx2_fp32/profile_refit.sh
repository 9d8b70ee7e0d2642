#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 57): fp32_profile.sh's float32 compiled profile made again with the
# later-draft-level measure (deep minus one-level cycles, at the 256-token context) and RADAR shipped for this
# curve: what the profile now charges a draft level, how it replays the shipped RADAR against the static tree,
# and what it recommends. About 20 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2_fp32
.venv/bin/hf-adaptive-spec profile --dtype float32 --compile --num-threads 2 --context-length 256 \
    --cache-slots 512 --repeats 15 --verify-tokens 1,2,4,8,12,16,32 --buckets 8,12,16,32 \
    --recording artifacts/replay/heldout-d6k4-shipped --lookup-tokens 0,1,2,4 \
    --json $O/profile_fp32_compiled_levels.json > $O/profile_fp32_compiled_levels.log 2>&1
