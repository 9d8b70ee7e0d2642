#!/usr/bin/env bash
# Training-step time of the TTT loss's versions, each a checkout (git worktree add DIR REV) run as the package:
# python puts the script's folder and then PYTHONPATH before the editable install. Stage 18's CPU recipe, 8 optimizer
# steps of which the last 5 profiled (a compilation falls in the first, unprofiled), arms interleaved per round,
# alone. ARMS holds name=checkout[=extra flags] entries separated by ';'. Session 74 ran, in order:
#   ARMS="before=/tmp/old;once=/tmp/once;once_compiled=/tmp/once=--compile_loss true"   (cc6ee27, 94f261e)
#   ARMS="before=/tmp/old;once=/tmp/once;rows=$PWD;rows_compiled=$PWD=--compile_loss true"   (+ the rows commit)
#   ARMS="before=/tmp/old;head=$PWD"   (after the review mends, f8a7d0c)
set -euo pipefail
OUT=${OUT:-/tmp/loss_once}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
args=(--config trainers/recipes/eagle3_smollm2_stage18_cpu.yaml --max_steps 8 --max_train_minutes 20 --profile_steps 5
      --num_conversations 48 --heldout_path "" --save_strategy no --report_to none)
IFS=';' read -r -a arms <<< "$ARMS"
for round in $(seq 1 "$ROUNDS"); do
  for arm in "${arms[@]}"; do
    IFS='=' read -r name checkout extra <<< "$arm"
    # shellcheck disable=SC2086  # the extra flags are words
    PYTHONPATH="$checkout" python "$checkout/trainers/eagle3.py" "${args[@]}" $extra --output_dir "$OUT/${name}_$round" \
        > "$OUT/${name}_$round.log" 2>&1
    echo "$name $round: $(head -n 1 "$OUT/${name}_$round/step_profile.txt")"
  done
done
