#!/usr/bin/env bash
# Session 96: issue 32's replay ceiling on the AVX-512 Xeon's two compiled curves (profiles_avx512.sh), with the
# 24 held-out first turns recorded here: what a policy choosing from what a cycle observes (after one draft level,
# with history, ridge k-fold) could gain over each profile's recommendation (bfloat16: LookupFirstPolicy 1/4/3 +
# 4-token branch; float32: the tree 2/4/8 + 4-token branch). Replay only (modelled time, nothing timed).
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session96
REC=artifacts/replay/heldout-d6k4-shipped
PY=.venv/bin/python
$PY examples/replay_score_ceiling.py --recording $REC --profile $O/profile_bfloat16_compiled_avx512.json \
    --static 1,4,3 --lookup-first --with-history --lookup-tokens 4 > $O/score_ceiling_bf16.log 2>&1
$PY examples/replay_score_ceiling.py --recording $REC --profile $O/profile_float32_compiled_avx512.json \
    --static 2,4,8 --with-history --lookup-tokens 4 > $O/score_ceiling_fp32.log 2>&1
