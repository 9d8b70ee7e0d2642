#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC's eager float32 curve (session 61): the replay ceilings with the fitted profile
# (profile_fitted.sh), against its recommendation, the static tree 2/4/7 with the 4-token prompt-lookup branch: the
# hindsight per-cycle choice (examples/replay_oracle.py) and the best rule from what a cycle observes before drafting
# and after one draft level (examples/replay_score_ceiling.py). Needs the float32 recording of the shipped drafter
# (artifacts/replay/heldout-d6k4-shipped, see the shipped LTD card). Modelled times, not a timing run; logs here.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_eager/avx2_fp32
R="--recording artifacts/replay/heldout-d6k4-shipped --profile $O/profile_fp32_eager_fitted.json"
$PY examples/replay_oracle.py $R --static 2,4,7 --lookup-tokens 4 > $O/oracle_fitted.log 2>&1
for LEVEL in 0 1; do
    $PY examples/replay_score_ceiling.py $R --static 2,4,7 --lookup-tokens 4 --with-history \
        --after-level $LEVEL > $O/score_ceiling_fitted_level$LEVEL.log 2>&1
done
