#!/usr/bin/env bash
# Session 64, a 2-core AMD EPYC with AVX-512 bfloat16 instructions (avx512_bf16, no AMX: the kind of machine most
# compiled bfloat16 results of sessions 30-47 ran on). Issue 32's steps on this machine with everything the policies
# and the profile gained since stage 15's run here (results/policies_compiled/stage15/run.sh, session 40s):
#   1. the shipped drafter's held-out recording (24 prompts, depth 6 / top-k 4 / 16 tokens; the one every profile uses);
#   2. `profile` with the buckets timed in turn inside each generate call (session 63) and a 2-token bucket, with and
#      without the 4-token prompt-lookup branch: the tree and the shipped policies' replay on this curve;
#   3. the replay ceilings against the recommended tree, with the branch;
#   4. the three policies retrained on this profile with the branch (n-grams of 2, as shipped), on action sets for a
#      flat curve that may also skip (LTD: verify nothing or 4/7/11/15 candidates, depth up to 6; RADAR: stop/continue
#      up to depth 6 or skip, verifying the recommended tree's node count; Re-SpS: 4-15 nodes at depth 1-6), then
#      replayed with the profile's ranking.
# Not a timing run except step 2 (alone on the machine). About 40 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../../.."
CLI=.venv/bin/hf-adaptive-spec
PY=.venv/bin/python
O=results/policies_compiled/avx512_bf16
REC=artifacts/replay/heldout-d6k4-shipped
P=$O/profile_bf16_compiled_avx512.json
N=bf16-compiled-avx512
LOOKUP_ARGS=(--lookup_tokens 4 --lookup_ngram_size 2)
test -f artifacts/eagle3_heldout_regenerated.jsonl || tail -n 100 artifacts/sharegpt_smollm2_regenerated.jsonl > artifacts/eagle3_heldout_regenerated.jsonl
test -d $REC || $CLI record --output $REC --prompts-file artifacts/eagle3_heldout_regenerated.jsonl --num-prompts 24 \
    --shard-size 6 --depth 6 --top-k 4 --total-tokens 16 --max-new-tokens 128 --num-threads 2 > $O/record.log 2>&1
test -f $P || $CLI profile --dtype bfloat16 --compile --num-threads 2 --context-length 256 --cache-slots 512 \
    --repeats 15 --verify-tokens 1,2,4,8,12,16,32 --buckets 2,8,12,16,32 --recording $REC --lookup-tokens 0,4 \
    --json $P > $O/profile_bf16_compiled_avx512.log 2>&1
TREE=$($PY -c "import json,sys; t=json.load(open(sys.argv[1]))['recommendation']['tree']; print(t['depth'], t['top_k'], t['total_tokens'])" $P)
read -r DEPTH TOPK TOTAL <<< "$TREE"
R=(--recording $REC --profile $P)
$PY examples/replay_static_grid.py "${R[@]}" --lookup-tokens 4 > $O/static_grid_lookup4.log 2>&1
$PY examples/replay_oracle.py "${R[@]}" --static $DEPTH,$TOPK,$TOTAL --lookup-tokens 4 > $O/oracle_lookup4.log 2>&1
$PY examples/replay_score_ceiling.py "${R[@]}" --static $DEPTH,$TOPK,$TOTAL --with-history --lookup-tokens 4 \
    > $O/score_ceiling_lookup4_history.log 2>&1
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_compiled.yaml --recording_dir $REC --profile_path $P \
    "${LOOKUP_ARGS[@]}" --lookup_feature true --size_choices 0 4 7 11 15 --output_dir artifacts/ltd-smollm2-$N \
    > $O/ltd_train.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_compiled.yaml --recording_path $REC --profile_path $P \
    "${LOOKUP_ARGS[@]}" --allow_skip true --total_tokens $TOTAL \
    --dataset_path artifacts/radar-dataset-smollm2-heldout-d6k4-shipped-d6t$TOTAL-lookup4 \
    --output_dir artifacts/radar-smollm2-$N > $O/radar_train.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_compiled.yaml --recordings $REC --hardware_profile $P \
    "${LOOKUP_ARGS[@]}" --grid_total_tokens 4 7 11 15 --grid_depths 1 2 3 4 6 --grid_top_ks 4 \
    --output_dir artifacts/resps-smollm2-$N > $O/resps_train.log 2>&1
$PY results/policies_compiled/replay_recommend.py --recording $REC --profile $P --policy-name $N \
    --lookup-tokens 0,4 > $O/replay_recommend.log 2>&1
echo DONE
