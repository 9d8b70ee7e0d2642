#!/usr/bin/env bash
# Session 63: issue 32's replay ceilings on the AMX Xeon's compiled bfloat16 curve, buckets timed in turn
# (profile_rotation.sh), with the 4-token prompt-lookup branch: the static grid, the hindsight oracle and the
# observable ceiling against the profile's tree 1/4/5 (+ the branch). Not a timing run (replay prices cycles from the
# profile): it ran niced beside the CI.
set -x
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/amx
R="--recording artifacts/replay/heldout-d6k4-shipped --profile $O/profile_bf16_compiled_amx_rotation_b2.json"
$PY examples/replay_static_grid.py $R --lookup-tokens 4 > $O/static_grid_lookup4.log 2>&1
$PY examples/replay_oracle.py $R --static 1,4,5 --lookup-tokens 4 > $O/oracle_lookup4.log 2>&1
$PY examples/replay_score_ceiling.py $R --static 1,4,5 --with-history --lookup-tokens 4 > $O/score_ceiling_lookup4_history.log 2>&1
echo DONE
