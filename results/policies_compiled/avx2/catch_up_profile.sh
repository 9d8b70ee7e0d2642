#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 53): the profile prices the drafter's catch-up. Same command as
# lookup_profile.sh's profile, now also measuring a drafting cycle's first step by the committed tokens it reads
# (catch_up_tokens / catch_up_seconds), with the drafter's head on the last row of that step only; the replay charges
# it, so the ranking of LookupFirstPolicy against the branch alone is checked against last_row_head.sh's live bench.
# About 25 minutes alone on 2 cores. Needs the recording of run.sh (artifacts/replay/heldout-d6k4-shipped). Run alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2
REC=artifacts/replay/heldout-d6k4-shipped
P=$O/profile_bf16_compiled_buckets2348_catch_up.json
.venv/bin/hf-adaptive-spec profile --dtype bfloat16 --compile --num-threads 2 --context-length 256 \
    --cache-slots 512 --repeats 15 --verify-tokens 1,2,3,4,8 --buckets 2,3,4,8 --recording $REC \
    --lookup-tokens 0,1,2,4 --json $P > $O/profile_catch_up.log 2>&1
