#!/usr/bin/env bash
# Issue 32 with the shipped stage-15 drafter on the 512-slot curve (caches sized per call): recording, profile,
# ceilings, the three policies retrained, replay with the profile's ranking; logs next to this file.
# About 20 minutes alone on 2 cores. Needs artifacts/sharegpt_smollm2_regenerated.jsonl (its last 100 conversations
# are the drafter's held-out set).
set -x
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
CLI=.venv/bin/hf-adaptive-spec
O=results/policies_compiled/stage15
DRAFTER=artifacts/eagle3-smollm2-stage15
REC=artifacts/replay/heldout-d6k4-stage15
P=$O/profile_bf16_compiled_stage15_slots512.json
R="--recording $REC --profile $P"
test -f artifacts/eagle3_heldout_regenerated.jsonl || tail -n 100 artifacts/sharegpt_smollm2_regenerated.jsonl > artifacts/eagle3_heldout_regenerated.jsonl
test -d $REC || $CLI record --output $REC --prompts-file artifacts/eagle3_heldout_regenerated.jsonl \
    --num-prompts 24 --shard-size 6 --depth 6 --top-k 4 --total-tokens 16 --max-new-tokens 128 \
    --eagle3-checkpoint $DRAFTER --num-threads 2 > $O/record.log 2>&1
test -f $P || $CLI profile --dtype bfloat16 --compile --eagle3 $DRAFTER --num-threads 2 --context-length 256 --cache-slots 512 \
    --repeats 15 --verify-tokens 1,8,12,16,32 --recording $REC --json $P > $O/profile_bf16_compiled_slots512.log 2>&1
$PY examples/replay_static_grid.py $R > $O/static_grid.log 2>&1
$PY examples/replay_static_grid.py $R --lookup-tokens 4 > $O/static_grid_lookup4.log 2>&1
$PY examples/replay_oracle.py $R --static 2,4,8 > $O/oracle.log 2>&1
$PY examples/replay_oracle.py $R --static 2,4,8 --lookup-tokens 4 > $O/oracle_lookup4.log 2>&1
$PY examples/replay_score_ceiling.py $R --static 2,4,8 --with-history > $O/score_ceiling_history.log 2>&1
$PY examples/replay_score_ceiling.py $R --static 2,4,8 --with-history --lookup-tokens 4 > $O/score_ceiling_lookup4_history.log 2>&1
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_compiled.yaml --recording_dir $REC \
    --profile_path $P --output_dir artifacts/ltd-smollm2-stage15 > $O/ltd_train.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_compiled.yaml --recording_path $REC \
    --profile_path $P --dataset_path artifacts/radar-dataset-smollm2-heldout-d6k4-stage15-t8 \
    --output_dir artifacts/radar-smollm2-stage15 > $O/radar_train.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_compiled.yaml --recordings $REC \
    --hardware_profile $P --output_dir artifacts/resps-smollm2-stage15 > $O/resps_train.log 2>&1
$PY results/policies_compiled/stage14/replay_recommend.py --stage 15 --profile $P > $O/replay_recommend.log 2>&1
echo DONE
