#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 56): the replay ceilings on the float32 compiled curve (session 55's
# profile: buckets 8/12/16/32 at 98.6/96.8/121.9/177.0 ms, draft step 12.0 ms), against its recommendation, the
# static tree 2/4/8 with the 4-token prompt-lookup branch. The recording is float32 (the float32 engine's trees).
# Needs run.sh's recording (artifacts/replay/heldout-d6k4-shipped). Logs next to this file.
# Session 57: PROFILE=... TAG=_levels bash ceilings.sh asks the same of profile_refit.sh's profile (a later draft level
# timed as deep minus one-level cycles: 17.2 ms at the 256-token context instead of 12.0), logs suffixed with TAG.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/avx2_fp32
P=${PROFILE:-results/fast_path/avx2/profile_fp32_compiled_buckets8_12_16_32.json}
T=${TAG:-}
R="--recording artifacts/replay/heldout-d6k4-shipped --profile $P"
$PY examples/replay_oracle.py $R --static 2,4,8 --lookup-tokens 4 > $O/oracle_lookup4$T.log 2>&1
for LEVEL in 0 1; do
    $PY examples/replay_score_ceiling.py $R --static 2,4,8 --lookup-tokens 4 --with-history \
        --after-level $LEVEL > $O/score_ceiling_lookup4_level$LEVEL$T.log 2>&1
done
# the same questions asked of a small nonlinear rule (examples/replay_score_ceiling.py --predictor mlp)
for LEVEL in 0 1; do
    $PY examples/replay_score_ceiling.py $R --static 2,4,8 --lookup-tokens 4 --with-history --predictor mlp \
        --after-level $LEVEL > $O/score_ceiling_lookup4_level${LEVEL}_mlp$T.log 2>&1
done
