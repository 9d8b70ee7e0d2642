#!/usr/bin/env bash
# The shipped policies' recipes (ltd_smollm2_skip, radar_smollm2_skip, resps_smollm2_plain: skip-or-verify action sets
# for the eager curve) retrained for the shipped stage-15 drafter (session 58): on the float32 held-out recording of
# it (24 prompts, depth 6 / top-k 4 / 16 tokens; the recipes' own d3k8 recording was the stage-4 drafter's) and
# profile.sh's eager float32 profile, with LOOKUP tokens of the prompt-lookup branch (the profile's recommendation;
# 0: none). Re-SpS's grid takes top-k 4 (the recording's). Then the three are replayed with the profile's ranking.
# About 20 minutes; not a timing run. PROFILE=... NAME=... train on another profile into artifacts/*-smollm2-NAME
# (logs *_train_NAME.log; session 61: PROFILE=$O/profile_fp32_eager_fitted.json NAME=fp32-fitted LOOKUP=4).
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_eager/avx2_fp32
REC=artifacts/replay/heldout-d6k4-shipped
P=${PROFILE:-$O/profile_fp32_eager.json}
L=${LOOKUP:-0}
N=${NAME:-fp32-eager}
S=${NAME:+_$NAME}
LOOKUP_ARGS=$([ "$L" -gt 0 ] && echo "--lookup_tokens $L --lookup_ngram_size 2" || true)
LTD_LOOKUP=$([ "$L" -gt 0 ] && echo "--lookup_feature true" || true)
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_skip.yaml --recording_dir $REC --profile_path $P \
    $LOOKUP_ARGS $LTD_LOOKUP --output_dir artifacts/ltd-smollm2-$N > $O/ltd_train$S.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_skip.yaml --recording_path $REC --profile_path $P \
    $LOOKUP_ARGS --dataset_path artifacts/radar-dataset-smollm2-heldout-d6k4-shipped-d3t8-lookup$L \
    --output_dir artifacts/radar-smollm2-$N > $O/radar_train$S.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_plain.yaml --recordings $REC --hardware_profile $P \
    $LOOKUP_ARGS --grid_top_ks 4 --output_dir artifacts/resps-smollm2-$N > $O/resps_train$S.log 2>&1
$PY results/policies_compiled/replay_recommend.py --recording $REC --profile $P --policy-name $N \
    --curve cpu/float32/eager --lookup-tokens 0,$L > $O/replay_recommend$S.log 2>&1
