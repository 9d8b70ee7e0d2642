#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 54): the replay ceilings asked again on the catch-up profile (session 53),
# against the profile's recommendation, LookupFirstPolicy 1/4/2 with the 1-token prompt-lookup branch. The oracle and
# the score ceiling now track the committed tokens the drafter has not read, so a cycle that skips the drafter is
# charged at the next drafting cycle's first step. Needs run.sh's recording (artifacts/replay/heldout-d6k4-shipped).
# A few minutes alone on 2 cores; logs next to this file.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/avx2
R="--recording artifacts/replay/heldout-d6k4-shipped --profile $O/profile_bf16_compiled_buckets2348_catch_up.json"
for N in 1 2; do
    $PY examples/replay_oracle.py $R --static 1,4,2 --lookup-tokens $N --lookup-first > $O/catch_up_oracle_lookup$N.log 2>&1
    for LEVEL in 0 1; do
        $PY examples/replay_score_ceiling.py $R --static 1,4,2 --lookup-tokens $N --lookup-first --with-history \
            --after-level $LEVEL > $O/catch_up_score_ceiling_lookup${N}_level$LEVEL.log 2>&1
    done
done
$PY examples/replay_score_ceiling.py $R --static 1,4,2 --lookup-tokens 1 --lookup-first --with-history --after-level 0 \
    --target-state-components 16 > $O/catch_up_score_ceiling_lookup1_level0_target_state16.log 2>&1
