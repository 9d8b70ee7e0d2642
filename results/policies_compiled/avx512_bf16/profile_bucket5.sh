#!/usr/bin/env bash
# Session 69, the AVX-512 bfloat16 EPYC: this machine's profile with the lookup-first cycle's own bucket (1 + the
# 4-token branch = 5) beside session 64's buckets 2,8,12,16,32, ranked on the 100-conversation 2-turn held-out
# recording (its record command: train_lookup_first_all.sh's header). Alone, about 15 minutes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx512_bf16
.venv/bin/hf-adaptive-spec profile --compile --dtype bfloat16 --num-threads 2 --context-length 256 \
    --verify-tokens 1,2,4,5,8,12,16,32 --repeats 15 --buckets 2,5,8,12,16,32 \
    --recording artifacts/replay/heldout-2turns100-d6k4-shipped --lookup-tokens 0,4 \
    --json $O/profile_bf16_compiled_avx512_bucket5.json > $O/profile_bf16_compiled_avx512_bucket5.log 2>&1
echo DONE
