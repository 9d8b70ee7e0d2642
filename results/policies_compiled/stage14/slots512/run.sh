#!/usr/bin/env bash
# Issue 32 on the 512-slot curve (caches sized per call): ceilings, retraining, replay; logs next to this file.
# Needs the stage-14 recording (hf-adaptive-spec record ..., results/README.md). About 8 minutes alone.
set -x
cd "$(dirname "$0")/../../../.."
PY=.venv/bin/python
O=results/policies_compiled/stage14/slots512
P=results/policies_compiled/stage14/profile_bf16_compiled_stage14_slots512.json
REC=artifacts/replay/heldout-d6k4-stage14
R="--recording $REC --profile $P"
$PY examples/replay_static_grid.py $R > $O/static_grid.log 2>&1
$PY examples/replay_static_grid.py $R --lookup-tokens 4 > $O/static_grid_lookup4.log 2>&1
$PY examples/replay_oracle.py $R --static 2,4,8 > $O/oracle.log 2>&1
$PY examples/replay_oracle.py $R --static 2,4,8 --lookup-tokens 4 > $O/oracle_lookup4.log 2>&1
$PY examples/replay_score_ceiling.py $R --static 2,4,8 --with-history > $O/score_ceiling_history.log 2>&1
$PY examples/replay_score_ceiling.py $R --static 2,4,8 --with-history --lookup-tokens 4 > $O/score_ceiling_lookup4_history.log 2>&1
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_compiled.yaml --recording_dir $REC \
    --profile_path $P --output_dir artifacts/ltd-smollm2-stage14-slots512 > $O/ltd_train.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_compiled.yaml --recording_path $REC \
    --profile_path $P --dataset_path artifacts/radar-dataset-smollm2-heldout-d6k4-stage14-slots512-t8 \
    --output_dir artifacts/radar-smollm2-stage14-slots512 > $O/radar_train.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_compiled.yaml --recordings $REC \
    --hardware_profile $P --output_dir artifacts/resps-smollm2-stage14-slots512 > $O/resps_train.log 2>&1
$PY results/policies_compiled/stage14/replay_recommend.py --profile $P --suffix=-slots512 > $O/replay_recommend.log 2>&1
echo DONE
