#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (bfloat16 without matrix instructions: a forward over n tokens costs about n tokens),
# with the shipped drafter and the small buckets 2,3,4,8 (session 51): recording, profile with the static-tree ranking,
# replay ceilings against the profile's best static tree, the three policies trained with the small-bucket recipes,
# and their replay with the profile's ranking. Logs next to this file. About 30 minutes alone on 2 cores. Needs
# artifacts/sharegpt_smollm2_regenerated.jsonl (its last 100 conversations are the drafter's held-out set).
set -x
cd "$(dirname "$0")/../../.."
CLI=.venv/bin/hf-adaptive-spec
PY=.venv/bin/python
O=results/policies_compiled/avx2
REC=artifacts/replay/heldout-d6k4-shipped
P=artifacts/replay/profile_bf16_compiled_buckets2348.json
test -f artifacts/eagle3_heldout_regenerated.jsonl || tail -n 100 artifacts/sharegpt_smollm2_regenerated.jsonl > artifacts/eagle3_heldout_regenerated.jsonl
test -d $REC || $CLI record --output $REC --prompts-file artifacts/eagle3_heldout_regenerated.jsonl \
    --num-prompts 24 --shard-size 6 --depth 6 --top-k 4 --total-tokens 16 --max-new-tokens 128 \
    --num-threads 2 > $O/record.log 2>&1
test -f $P || $CLI profile --dtype bfloat16 --compile --num-threads 2 --context-length 256 --cache-slots 512 \
    --repeats 15 --verify-tokens 1,2,3,4,8 --buckets 2,3,4,8 --recording $REC --json $P > $O/profile.log 2>&1
cp $P $O/
STATIC=$($PY -c "import json, sys; t = json.load(open(sys.argv[1]))['recommendation']['tree']; print(t['depth'], t['top_k'], t['total_tokens'], sep=',')" $P)
bash results/policies_compiled/replay_ceilings.sh $REC $P $O $STATIC
$PY trainers/ltd.py --config trainers/recipes/ltd_smollm2_small_buckets.yaml > $O/ltd_train.log 2>&1
$PY trainers/radar.py --config trainers/recipes/radar_smollm2_small_buckets.yaml > $O/radar_train.log 2>&1
$PY trainers/resps.py --config trainers/recipes/resps_smollm2_small_buckets.yaml > $O/resps_train.log 2>&1
$PY results/policies_compiled/replay_recommend.py --recording $REC --profile $P --policy-name small-buckets > $O/replay_recommend.log 2>&1
echo DONE
