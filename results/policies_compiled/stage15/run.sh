#!/usr/bin/env bash
# Issue 32 with the shipped stage-15 drafter on the 512-slot curve (caches sized per call): recording, profile,
# ceilings, the three policies retrained, replay with the profile's ranking; logs next to this file.
# About 20 minutes alone on 2 cores. Needs artifacts/sharegpt_smollm2_regenerated.jsonl (its last 100 conversations
# are the drafter's held-out set).
set -x
cd "$(dirname "$0")/../../.."
CLI=.venv/bin/hf-adaptive-spec
O=results/policies_compiled/stage15
DRAFTER=artifacts/eagle3-smollm2-stage15
REC=artifacts/replay/heldout-d6k4-stage15
P=$O/profile_bf16_compiled_stage15_slots512.json
test -f artifacts/eagle3_heldout_regenerated.jsonl || tail -n 100 artifacts/sharegpt_smollm2_regenerated.jsonl > artifacts/eagle3_heldout_regenerated.jsonl
test -d $REC || $CLI record --output $REC --prompts-file artifacts/eagle3_heldout_regenerated.jsonl \
    --num-prompts 24 --shard-size 6 --depth 6 --top-k 4 --total-tokens 16 --max-new-tokens 128 \
    --eagle3-checkpoint $DRAFTER --num-threads 2 > $O/record.log 2>&1
test -f $P || $CLI profile --dtype bfloat16 --compile --eagle3 $DRAFTER --num-threads 2 --context-length 256 --cache-slots 512 \
    --repeats 15 --verify-tokens 1,8,12,16,32 --recording $REC --json $P > $O/profile_bf16_compiled_slots512.log 2>&1
bash results/policies_compiled/retrain_on_recording.sh $REC $P $O 15
echo DONE
