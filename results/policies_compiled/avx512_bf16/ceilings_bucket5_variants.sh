#!/usr/bin/env bash
# Session 71, after ceilings_bucket5.sh: is the observable ceiling the fitted rule's limit rather than the
# observations'? The same k-fold replay on the 48 held-out 2-turn conversations with a small MLP in place of the ridge
# rule, and with the target's recorded hidden states (8 principal components) added to what the rule sees. Replay only.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/avx512_bf16
rec=heldout-2turns48-d6k4-shipped
R=(--recording artifacts/replay/$rec --profile $O/profile_bf16_compiled_avx512_bucket5.json --static 2,4,8 --lookup-first
   --lookup-tokens 4 --with-history)
for level in 0 1; do
    $PY examples/replay_score_ceiling.py "${R[@]}" --after-level $level --predictor mlp 2>&1 \
        | grep -v "Loading weights" > $O/bucket5_score_ceiling_mlp_level${level}_$rec.log
    $PY examples/replay_score_ceiling.py "${R[@]}" --after-level $level --target-state-components 8 2>&1 \
        | grep -v "Loading weights" > $O/bucket5_score_ceiling_state8_level${level}_$rec.log
done
echo DONE
