#!/usr/bin/env bash
# Session 98, the AVX-512 Xeon kind of sessions 96-97 (no AVX512-BF16, no AMX): session 96's float32 profile again
# (the same command and held-out recording). Session 96's bucket times inside generate ran 12-35% above its own
# forwards (bucket 2: 45.1 ms against 31.2 for a 2-token forward), and this session's did not (33.5 against 33.5);
# the ranking of lookup-first cycles, which verify in the small buckets, depends on them. About 20 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session98
.venv/bin/hf-adaptive-spec profile --dtype float32 --compile --num-threads 2 --context-length 256 \
    --cache-slots 512 --repeats 15 --verify-tokens 1,2,4,8,12,16,32 --buckets 2,3,5,8,12,16,32 \
    --recording artifacts/replay/heldout-d6k4-shipped --lookup-tokens 0,1,4 \
    --json "$O/profile_float32_compiled_avx512.json" > "$O/profile_float32_compiled_avx512.log" 2>&1
echo DONE >> "$O/profile_float32_compiled_avx512.log"
