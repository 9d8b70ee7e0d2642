#!/usr/bin/env bash
# Issue 32's replay ceilings for the stage-15 drafter, re-run after replay stopped counting tokens past an
# end-of-sequence token (0031692, 2026-11-30): the recording of run.sh made again (the earlier one is not on this
# machine), the same 512-slot profile, and the static grid, hindsight oracle and observable ceilings of run.sh.
# Logs go to stage15/eos/. About 12 minutes alone on 2 cores.
set -x
cd "$(dirname "$0")/../../.."
CLI=.venv/bin/hf-adaptive-spec
O=results/policies_compiled/stage15/eos
DRAFTER=artifacts/eagle3-smollm2-stage15
REC=artifacts/replay/heldout-d6k4-stage15
P=results/policies_compiled/stage15/profile_bf16_compiled_stage15_slots512.json
mkdir -p $O
test -d $REC || $CLI record --output $REC --prompts-file artifacts/eagle3_heldout_regenerated.jsonl \
    --num-prompts 24 --shard-size 6 --depth 6 --top-k 4 --total-tokens 16 --max-new-tokens 128 \
    --eagle3-checkpoint $DRAFTER --num-threads 2 > $O/record.log 2>&1
bash results/policies_compiled/replay_ceilings.sh $REC $P $O
echo DONE
