#!/usr/bin/env bash
# Issue 31, stage 11 on a lent GPU: stage 10 trained on for what is left of one 10-minute call, at batch 64
# grouped by length (trainers/recipes/eagle3_smollm2_stage11_gpu.yaml). Run from the repository root after
# transfers have put into $STAGE the GGUF parts and wheels (as for scripts/device_stage9.sh) and, in the
# sent tree's carried .xfer3/: the training set (sharegpt_smollm2_target9.jsonl.gz), the held-out set and
# stage 10's folder.
# The time box: CALL_SECONDS is the call's limit; training gets what is left after RESERVE_SECONDS for
# loading, the final held-out point, saving and export. A batch that runs out of memory is halved once.
# What comes back in $OUT: the weights in bfloat16 split under the 16 MiB file limit, the folder (card,
# curve, config) and the log.
# A CPU rehearsal: DEVICE=cpu PY=.venv/bin/python SKIP_WHEELS=1 CALL_SECONDS=150 TRAIN_EXTRA="--use_cpu true
#   --bf16 false --tf32 false --heldout_conversations 2 --dataloader_num_workers 0" BATCH=2
set -u
START=$(date +%s)
BATCH=${BATCH:-64}
source scripts/device_env.sh
cp "$OUT/versions.log" "$OUT/train.log"
XFER=${XFER:-.xfer3}
cp -r "$XFER"/eagle3-smollm2-stage10 "$XFER"/eagle3_heldout_regenerated.jsonl artifacts/
gunzip -c "$XFER"/sharegpt_smollm2_target9.jsonl.gz > artifacts/sharegpt_smollm2_target9.jsonl

train_in_call trainers/recipes/eagle3_smollm2_stage11_gpu.yaml "$BATCH"
grep "held-out\|train_runtime" "$OUT/train.log" | tail -4

echo "== export $(date +%T)"
export_drafter artifacts/eagle3-smollm2-stage11 stage11
echo "== done $(date +%T), $(( $(date +%s) - START )) s"
