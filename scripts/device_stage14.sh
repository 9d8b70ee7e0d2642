#!/usr/bin/env bash
# Issue 31, stage 14 on a lent GPU, in two calls of one session after the GGUF's first part was carried in by
# a call of its own (the machine stays warm between calls; 838 s of device time in all on 2026-11-27), as
# scripts/device_stage12.sh did stage 12: more conversations, the lever stages 12-13 left (the one-layer
# drafter flat at 0.544 on target12's 16,084 conversations, through a lower rate on the CPU as well).
#   PHASE=regenerate  the rest of the seed-9 selection of ShareGPT's prompts (about 2,980 unanswered after
#                     sampled9 + sampled11 + sampled12, carried gzipped in .xfer4/sampled_done.jsonl.gz),
#                     time-boxed by REGEN_SECONDS; the new conversations (sampled14) stay in $STAGE for the
#                     next call and come back gzipped in $OUT.
#   PHASE=train       stage 12 trained on target12 + sampled14 (trainers/recipes/eagle3_smollm2_stage14_gpu.yaml)
#                     for what is left of the call (CALL_SECONDS less RESERVE_SECONDS); .xfer3/ carries stage
#                     12's folder, the held-out set and target12 gzipped. The drafter comes back as
#                     scripts/device_stage11.sh's.
# Transfers as for scripts/device_stage9.sh: GGUF parts and wheels in $STAGE by an earlier call.
# A CPU rehearsal: DEVICE=cpu PY=.venv/bin/python SKIP_WHEELS=1 STAGE=/tmp/stage-cpu OUT=/tmp/out-cpu plus
#   PHASE=regenerate REGEN_SECONDS=100 BATCH=4, then PHASE=train CALL_SECONDS=200 BATCH=2 TRAIN_EXTRA="--use_cpu
#   true --bf16 false --tf32 false --heldout_conversations 2 --dataloader_num_workers 0 --max_length 256
#   --recompute_loss_softmax false"
set -u
START=$(date +%s)
source scripts/device_env.sh

train_stage14() {
    cp -r .xfer3/eagle3-smollm2-stage12 .xfer3/eagle3_heldout_regenerated.jsonl artifacts/
    (gunzip -c .xfer3/sharegpt_smollm2_target12.jsonl.gz; cat "$STAGE/sharegpt_smollm2_sampled14.jsonl") \
        > artifacts/sharegpt_smollm2_target14.jsonl
    wc -l artifacts/sharegpt_smollm2_target14.jsonl | tee -a "$OUT/train.log"
    train_in_call trainers/recipes/eagle3_smollm2_stage14_gpu.yaml "${BATCH:-64}"
    grep "held-out\|train_runtime" "$OUT/train.log" | tail -4
    export_drafter artifacts/eagle3-smollm2-stage14 stage14
}

run_phase sharegpt_smollm2_sampled14 train_stage14
