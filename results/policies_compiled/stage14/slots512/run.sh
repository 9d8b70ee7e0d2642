#!/usr/bin/env bash
# Issue 32 on the 512-slot curve (caches sized per call): ceilings, retraining, replay; logs next to this file.
# Needs the stage-14 recording (hf-adaptive-spec record ..., results/README.md). About 8 minutes alone.
set -x
cd "$(dirname "$0")/../../../.."
O=results/policies_compiled/stage14/slots512
P=results/policies_compiled/stage14/profile_bf16_compiled_stage14_slots512.json
REC=artifacts/replay/heldout-d6k4-stage14
bash results/policies_compiled/retrain_on_recording.sh $REC $P $O 14 -slots512
echo DONE
