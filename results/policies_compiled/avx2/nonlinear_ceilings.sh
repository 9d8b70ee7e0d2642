#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 55): is the observable ceiling against LookupFirstPolicy 1/4/2 (1-token
# branch) held down by the rule being linear? The score ceiling's rules refitted as a small MLP (--predictor mlp),
# before drafting and after one level, with and without the target's hidden states; the ridge rows again beside them
# (the lookup features now come from ReplayEnvironment.lookup_chain, the replay's own chain). Needs run.sh's recording
# (artifacts/replay/heldout-d6k4-shipped). About 15 minutes alone on 2 cores; logs next to this file.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/avx2
R="--recording artifacts/replay/heldout-d6k4-shipped --profile $O/profile_bf16_compiled_buckets2348_catch_up.json"
C="--static 1,4,2 --lookup-first --with-history"
for N in 1 2; do
    for LEVEL in 0 1; do
        for PREDICTOR in ridge mlp; do
            $PY examples/replay_score_ceiling.py $R $C --lookup-tokens $N --after-level $LEVEL --predictor $PREDICTOR \
                > $O/nonlinear_score_ceiling_lookup${N}_level${LEVEL}_$PREDICTOR.log 2>&1
        done
    done
done
for PREDICTOR in ridge mlp; do
    $PY examples/replay_score_ceiling.py $R $C --lookup-tokens 1 --after-level 0 --target-state-components 16 \
        --predictor $PREDICTOR > $O/nonlinear_score_ceiling_lookup1_level0_target_state16_$PREDICTOR.log 2>&1
done
