#!/usr/bin/env bash
# Session 70, the AVX-512 bfloat16 EPYC: issue 32's ceilings on this machine's curve with the 5-token bucket
# (profile_bucket5.sh) against what ships as the best static configuration there, LookupFirstPolicy 2/4/8 + 4-token
# branch: the hindsight oracle (per cycle, the best tree shape knowing the future) and the observable ceiling (a
# ridge rule over what a policy sees, with the history, choosing before drafting or after one level; k-fold by
# prompt). On the first 48 of the 2-turn held-out conversations and on Spec-Bench 13 x 1's first turns, recorded again
# in session 71 on a fresh machine (record_heldout48_session71.log: the command in train_lookup_first_all.sh's header
# with --num-prompts 48, as in session 67; record_specbench13_session71.log: replay_specbench.sh's command; 11 of the
# 13 questions fit --max-prompt-tokens 512). Replay only (modelled time): not a timing run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/avx512_bf16
P=$O/profile_bf16_compiled_avx512_bucket5.json
for rec in heldout-2turns48-d6k4-shipped specbench13-d6k4-shipped; do
    R=(--recording artifacts/replay/$rec --profile $P --static 2,4,8 --lookup-first --lookup-tokens 4)
    $PY examples/replay_oracle.py "${R[@]}" > $O/bucket5_oracle_$rec.log 2>&1
    for level in 0 1; do
        $PY examples/replay_score_ceiling.py "${R[@]}" --with-history --after-level $level \
            > $O/bucket5_score_ceiling_level${level}_$rec.log 2>&1
    done
done
echo DONE
