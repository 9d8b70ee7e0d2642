#!/usr/bin/env bash
# Issue 31, stage 12 on a lent GPU, in two calls of one session (the machine stays warm between them):
#   PHASE=regenerate  new sampled answers (device_env.sh's regenerate): the seed-9 prompt selection resumed
#                     after the 4,096 answered in stages 9 and 11 (sampled9 + sampled11, carried gzipped),
#                     bfloat16, batches of 1,024, sampling at 0.8, two turns; time-boxed by REGEN_SECONDS. The new conversations
#                     (sampled12) stay in $STAGE for the next call and come back gzipped in $OUT.
#   PHASE=train       stage 11 trained on target9 + sampled11 + sampled12 with a 12,288-token vocabulary
#                     (trainers/recipes/eagle3_smollm2_stage12_gpu.yaml) for what is left of the call
#                     (CALL_SECONDS less RESERVE_SECONDS); the drafter comes back as scripts/device_stage11.sh's.
# Transfers as for scripts/device_stage9.sh: GGUF parts and wheels in $STAGE; the regeneration's prompts
# (scripts/device_stage9_prompts.py) and resume file in .xfer4/; training set, held-out set and stage 11's
# folder in .xfer3/.
# A CPU rehearsal: DEVICE=cpu PY=.venv/bin/python SKIP_WHEELS=1 STAGE=/tmp/stage-cpu OUT=/tmp/out-cpu plus
#   PHASE=regenerate REGEN_SECONDS=100 BATCH=4, then PHASE=train CALL_SECONDS=200 BATCH=2 TRAIN_EXTRA="--use_cpu
#   true --bf16 false --tf32 false --heldout_conversations 2 --dataloader_num_workers 0 --max_length 256"
set -u
START=$(date +%s)
source scripts/device_env.sh

train_stage12() {
    cp -r .xfer3/eagle3-smollm2-stage11 .xfer3/eagle3_heldout_regenerated.jsonl artifacts/
    (gunzip -c .xfer3/sharegpt_smollm2_target9.jsonl.gz; gunzip -c .xfer3/sharegpt_smollm2_sampled11.jsonl.gz
     cat "$STAGE/sharegpt_smollm2_sampled12.jsonl") > artifacts/sharegpt_smollm2_target12.jsonl
    wc -l artifacts/sharegpt_smollm2_target12.jsonl | tee -a "$OUT/train.log"
    train_in_call trainers/recipes/eagle3_smollm2_stage12_gpu.yaml "${BATCH:-64}"
    grep "held-out\|train_runtime" "$OUT/train.log" | tail -4
    export_drafter artifacts/eagle3-smollm2-stage12 stage12
}

run_phase sharegpt_smollm2_sampled12 train_stage12
