#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 54): LTD, Re-SpS and RADAR retrained with the small-bucket recipes on the
# catch-up profile (session 53) with the 1-token prompt-lookup branch replayed on every tree (LTD's heads also see
# the chain's length, lookup_feature), then replayed with the profile's ranking against its recommendation,
# LookupFirstPolicy 1/4/2. About 10 minutes alone on 2 cores. Needs run.sh's recording; logs next to this file.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/avx2
REC=artifacts/replay/heldout-d6k4-shipped
P=$O/profile_bf16_compiled_buckets2348_catch_up.json
LOOKUP="--lookup_tokens 1 --lookup_ngram_size 2"
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_small_buckets.yaml --profile_path $P $LOOKUP \
    --lookup_feature true --output_dir artifacts/ltd-smollm2-catch-up > $O/catch_up_ltd_train.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_small_buckets.yaml --profile_path $P $LOOKUP \
    --dataset_path artifacts/radar-dataset-smollm2-heldout-d6k4-shipped-t3-lookup1 \
    --output_dir artifacts/radar-smollm2-catch-up > $O/catch_up_radar_train.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_small_buckets.yaml --hardware_profile $P $LOOKUP \
    --output_dir artifacts/resps-smollm2-catch-up > $O/catch_up_resps_train.log 2>&1
$PY results/policies_compiled/replay_recommend.py --recording $REC --profile $P --policy-name catch-up \
    --lookup-tokens 1 > $O/catch_up_replay_recommend.log 2>&1
