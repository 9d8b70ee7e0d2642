#!/usr/bin/env bash
# Issue 31: training variants from one starting drafter, compared in one call of a lent GPU. Each variant
# trains the same recipe (RECIPE, default trainers/recipes/eagle3_smollm2_stage13_gpu.yaml: stage 12 on
# target12, batch 64, the loss's softmaxes recomputed) with its own extra arguments, for an equal share of
# the call, and comes back as its own drafter; the held-out set measures them alike on a CPU afterwards
# (examples/eagle3_heldout_accuracy.py).
#   VARIANTS="name:extra args|name:extra args"   e.g.
#   VARIANTS="stage13-one-layer:|stage13-two-layers:--draft_num_hidden_layers 2"
#   VARIANTS="stage13-ttt5:|stage13-ttt7:--ttt_steps 7"
# Stage 15 (2026-11-28): RECIPE=trainers/recipes/eagle3_smollm2_stage14_gpu.yaml INIT=eagle3-smollm2-stage14
#   DATA=sharegpt_smollm2_target14 CALL_SECONDS=565 VARIANTS="stage15-ttt5:|stage15-ttt7:--ttt_steps 7"
#   (results/README.md, "Stage 15"); the 5-step arm is artifacts/eagle3-smollm2-stage15.
# Transfers: scripts/device_kit.sh packs them and says the calls (GGUF parts and wheels in $STAGE by earlier calls,
# then this call with XFER=.xfer/c). Before it, as for scripts/device_stage9.sh by hand: this call
# carries .xfer3/ with the starting drafter's folder (INIT, default eagle3-smollm2-stage12), the held-out set
# and the training set gzipped (DATA, default sharegpt_smollm2_target12: target9 + sampled11 + sampled12;
# from stage 14 on: RECIPE=trainers/recipes/eagle3_smollm2_stage14_gpu.yaml INIT=eagle3-smollm2-stage14
# DATA=sharegpt_smollm2_target14, the recipe's data).
# What comes back in $OUT per variant: its weights in bfloat16 split under the 16 MiB file limit, its folder
# (card, curve, config); and the log.
# A CPU rehearsal: DEVICE=cpu PY=.venv/bin/python SKIP_WHEELS=1 STAGE=/tmp/stage-cpu OUT=/tmp/out-cpu
#   CALL_SECONDS=400 BATCH=2 TRAIN_EXTRA_ALL="--use_cpu true --bf16 false --tf32 false --heldout_conversations 2
#   --dataloader_num_workers 0 --max_length 256 --recompute_loss_softmax false"
set -u
CALL_START=$(date +%s)
CALL_SECONDS=${CALL_SECONDS:-560}
RECIPE=${RECIPE:-trainers/recipes/eagle3_smollm2_stage13_gpu.yaml}
INIT=${INIT:-eagle3-smollm2-stage12}
source scripts/device_env.sh
cp "$OUT/versions.log" "$OUT/train.log"
XFER=${XFER:-.xfer3}
cp -r "$XFER/$INIT" "$XFER"/eagle3_heldout_regenerated.jsonl artifacts/
DATA=${DATA:-sharegpt_smollm2_target12}
gunzip -c "$XFER/$DATA.jsonl.gz" > "artifacts/$DATA.jsonl"
IFS='|' read -ra VARIANT_LIST <<< "${VARIANTS:?set VARIANTS=\"name:extra args|name:extra args\"}"

# Equal shares fixed now, so that every variant trains for the same minutes (the budget counts the training
# loop; loading, the held-out points before and after and the export come out of RESERVE_SECONDS, default 130:
# on 2026-11-28 a variant's 208 s of training took 328 s in all, so stage 14's 70 s reserve ran the call past its
# limit and lost the second variant).
export RESERVE_SECONDS=${RESERVE_SECONDS:-130}
share=$(( (CALL_START + CALL_SECONDS - $(date +%s)) / ${#VARIANT_LIST[@]} ))
if [ "$share" -le "$(( RESERVE_SECONDS + 60 ))" ]; then
    echo "A share of $share s leaves under a minute of training per variant: raise CALL_SECONDS or pass fewer VARIANTS." >&2
    exit 2
fi
for variant in "${VARIANT_LIST[@]}"; do
    name=${variant%%:*}
    echo "== $name: ${variant#*:} ($share s) $(date +%T)" | tee -a "$OUT/train.log"
    START=$(date +%s) CALL_SECONDS=$share \
        TRAIN_EXTRA="--init_from artifacts/$INIT --output_dir artifacts/$name ${variant#*:} ${TRAIN_EXTRA_ALL:-}" \
        train_in_call "$RECIPE" "${BATCH:-64}"
    grep "held-out\|train_runtime" "$OUT/train.log" | tail -2
    [ -f "artifacts/$name/model.safetensors" ] && export_drafter "artifacts/$name" "$name"
done
echo "== done $(date +%T), $(( $(date +%s) - CALL_START )) s"
