#!/usr/bin/env bash
# Issue 32's steps after a recording and a profile exist: the replay's static grid, the hindsight and observable
# ceilings (with and without the prompt-lookup branch), the three policies retrained, and their replay with
# `hf-adaptive-spec profile`'s ranking. Logs go to LOGDIR; policies to artifacts/{ltd,radar,resps}-smollm2-stage{STAGE}{SUFFIX}.
#   bash results/policies_compiled/retrain_on_recording.sh RECORDING PROFILE LOGDIR STAGE [SUFFIX]
# Run from the repository root (the stage scripts call it so), alone on the machine: about 8 minutes on 2 cores.
set -x
REC=$1; P=$2; O=$3; STAGE=$4; SUFFIX=${5:-}
PY=.venv/bin/python
NAME=stage$STAGE$SUFFIX
bash results/policies_compiled/replay_ceilings.sh $REC $P $O
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_compiled.yaml --recording_dir $REC \
    --profile_path $P --output_dir artifacts/ltd-smollm2-$NAME > $O/ltd_train.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_compiled.yaml --recording_path $REC \
    --profile_path $P --dataset_path artifacts/radar-dataset-smollm2-heldout-d6k4-$NAME-t8 \
    --output_dir artifacts/radar-smollm2-$NAME > $O/radar_train.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_compiled.yaml --recordings $REC \
    --hardware_profile $P --output_dir artifacts/resps-smollm2-$NAME > $O/resps_train.log 2>&1
$PY results/policies_compiled/replay_recommend.py --stage $STAGE --profile $P --suffix=$SUFFIX > $O/replay_recommend.log 2>&1
