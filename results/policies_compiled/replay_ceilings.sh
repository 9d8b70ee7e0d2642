#!/usr/bin/env bash
# Issue 32's replay measures for a recording and a profile: the static grid, the hindsight oracle and the
# observable ceilings, each without and with the 4-token prompt-lookup branch. Logs go to LOGDIR.
#   bash results/policies_compiled/replay_ceilings.sh RECORDING PROFILE LOGDIR [STATIC]
# STATIC (depth,top_k,total_tokens; default 2,4,8) is the static tree the oracle and ceilings compare with.
# Run from the repository root, alone on the machine: a few minutes on 2 cores.
set -x
REC=$1; P=$2; O=$3; STATIC=${4:-2,4,8}
PY=.venv/bin/python
R="--recording $REC --profile $P"
$PY examples/replay_static_grid.py $R > $O/static_grid.log 2>&1
$PY examples/replay_static_grid.py $R --lookup-tokens 4 > $O/static_grid_lookup4.log 2>&1
$PY examples/replay_oracle.py $R --static $STATIC > $O/oracle.log 2>&1
$PY examples/replay_oracle.py $R --static $STATIC --lookup-tokens 4 > $O/oracle_lookup4.log 2>&1
$PY examples/replay_score_ceiling.py $R --static $STATIC --with-history > $O/score_ceiling_history.log 2>&1
$PY examples/replay_score_ceiling.py $R --static $STATIC --with-history --lookup-tokens 4 > $O/score_ceiling_lookup4_history.log 2>&1
