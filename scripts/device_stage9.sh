#!/usr/bin/env bash
# Issue 31, stage 9 on a lent GPU (the `device` tool's H100; no network there). Run from the repository root
# after three transfers have put into $STAGE: the embedded GGUF in parts (gguf.part*), the wheels this
# package pins that the machine lacks (whl/), the prompts (sharegpt_prompts.json.gz), the greedy training
# set (sharegpt_smollm2_target6.jsonl), the held-out set and stage 8's weights (eagle3-smollm2-stage8-step200/).
# The prompts: scripts/device_stage9_prompts.py (the held-out conversations left out).
# The transfers (64 MiB a call): the tracked tree is 170 MB, so results/, artifacts/ and the shipped
# checkpoints were left out of the sent tree (git rm --cached plus ignore lines, restored after), the GGUF
# split in two carried folders of 60 and 34 MiB, and hf_adaptive_spec/checkpoints/__init__.py carried
# by name (the package imports it).
# Steps, each time-boxed so the whole fits one 10-minute call; what finished comes back in $OUT:
#   1. re-answer the prompts with the target (bfloat16, batches of 1,024, sampling at 0.8, two turns);
#   2. train stage 9 (trainers/recipes/eagle3_smollm2_stage9_gpu.yaml) for a fixed time budget;
#   3. the weights in bfloat16, split under the transfer's 16 MiB file limit, with curve, card and logs;
#   4. the engine on CUDA: float32 greedy identity with the new drafter (eager), then bfloat16 compiled.
# A CPU rehearsal: DEVICE=cpu PY=.venv/bin/python SKIP_WHEELS=1 plus small REGEN_EXTRA / TRAIN_EXTRA / CHECK_EXTRA arguments.
set -u
source scripts/device_env.sh
cp "$OUT/versions.log" "$OUT/regenerate.log"
gunzip -kf "$STAGE/sharegpt_prompts.json.gz"
cp -r "$STAGE"/sharegpt_smollm2_target6.jsonl "$STAGE"/eagle3_heldout_regenerated.jsonl "$STAGE"/eagle3-smollm2-stage8-step200 artifacts/

echo "== 1. regenerate $(date +%T)"
timeout 140 $PY trainers/regenerate_sharegpt.py --output artifacts/sharegpt_smollm2_sampled9.jsonl \
    --sharegpt_file "$STAGE/sharegpt_prompts.json" --num_conversations 100000 --seed 9 --device $DEVICE --dtype bfloat16 \
    --batch_size 1024 --max_turns 2 --max_prompt_tokens 1024 --max_new_tokens 256 --temperature 0.8 ${REGEN_EXTRA:-} >> "$OUT/regenerate.log" 2>&1
$PY - <<'PY'
import json
good = []
for line in open("artifacts/sharegpt_smollm2_sampled9.jsonl", encoding="utf-8"):
    try:
        good.append(json.dumps(json.loads(line)) + "\n")
    except json.JSONDecodeError:
        pass  # the line the time box cut
open("artifacts/sharegpt_smollm2_sampled9.jsonl", "w", encoding="utf-8").writelines(good)
print(len(good), "sampled conversations")
PY
cat artifacts/sharegpt_smollm2_target6.jsonl artifacts/sharegpt_smollm2_sampled9.jsonl > artifacts/sharegpt_smollm2_target9.jsonl
gzip -c artifacts/sharegpt_smollm2_sampled9.jsonl > "$OUT/sharegpt_smollm2_sampled9.jsonl.gz"

echo "== 2. train $(date +%T)"
timeout 290 $PY trainers/eagle3.py --config trainers/recipes/eagle3_smollm2_stage9_gpu.yaml ${TRAIN_EXTRA:-} > "$OUT/train.log" 2>&1
tail -5 "$OUT/train.log"

echo "== 3. export $(date +%T)"
export_drafter artifacts/eagle3-smollm2-stage9 stage9

echo "== 4. engine on CUDA $(date +%T)"
timeout 45 $PY examples/quickstart.py --device $DEVICE --dtype float32 --eager --checkpoint artifacts/eagle3-smollm2-stage9 ${CHECK_EXTRA:-} > "$OUT/engine.log" 2>&1
tail -3 "$OUT/engine.log"
timeout 75 $PY examples/quickstart.py --device $DEVICE --dtype bfloat16 --checkpoint artifacts/eagle3-smollm2-stage9 ${CHECK_EXTRA:-} >> "$OUT/engine.log" 2>&1
tail -3 "$OUT/engine.log"
echo "== done $(date +%T)"
