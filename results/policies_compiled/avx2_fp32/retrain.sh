#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 56): LTD, Re-SpS and RADAR retrained for the float32 compiled curve
# (session 55's profile: buckets 8/12/16/32 at 98.6/96.8/121.9/177.0 ms per cycle, draft step 12.0 ms) on the float32
# held-out recording, with the 4-token prompt-lookup branch the profile recommends replayed on every tree. The compiled
# recipes' action sets, moved down by the branch's 4 tokens so that tree + branch fill the 8, 12 and 16 buckets: LTD
# verifies 3, 7 or 11 candidates (+ root + branch: 8, 12, 16), Re-SpS's grid holds trees of 4, 8 or 12 tokens at
# depth 2-6, RADAR drafts up to depth 6 and verifies 8 (+ branch: the 12 bucket, as cheap as 8 here). Then the three
# are replayed with the profile's ranking against its recommendation (tree 2/4/8 + the 4-token branch).
# Needs run.sh's recording; logs next to this file.
# Session 57: PROFILE=$O/profile_fp32_compiled_levels.json NAME=fp32-levels TAG=_levels bash retrain.sh retrains them on
# profile_refit.sh's profile (later draft levels priced right) into artifacts/{ltd,radar,resps}-smollm2-fp32-levels,
# replayed into replay_recommend_retrained_levels.log.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/avx2_fp32
REC=artifacts/replay/heldout-d6k4-shipped
P=${PROFILE:-results/fast_path/avx2/profile_fp32_compiled_buckets8_12_16_32.json}
N=${NAME:-fp32-compiled}
T=${TAG:-}
LOOKUP="--lookup_tokens 4 --lookup_ngram_size 2"
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_compiled.yaml --recording_dir $REC --profile_path $P $LOOKUP \
    --lookup_feature true --size_choices 3 7 11 --warmup_verify_size 7 \
    --output_dir artifacts/ltd-smollm2-$N > $O/ltd_train$T.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_compiled.yaml --recording_path $REC --profile_path $P \
    $LOOKUP --dataset_path artifacts/radar-dataset-smollm2-heldout-d6k4-shipped-t8-lookup4 \
    --output_dir artifacts/radar-smollm2-$N > $O/radar_train$T.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_compiled.yaml --recordings $REC --hardware_profile $P \
    $LOOKUP --grid_total_tokens 4 8 12 --output_dir artifacts/resps-smollm2-$N > $O/resps_train$T.log 2>&1
$PY results/policies_compiled/replay_recommend.py --recording $REC --profile $P --policy-name $N \
    --curve cpu/float32/compiled --lookup-tokens 4 > $O/replay_recommend${T:+_retrained$T}.log 2>&1
