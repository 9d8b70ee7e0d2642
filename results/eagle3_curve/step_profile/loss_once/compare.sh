#!/usr/bin/env bash
# The TTT loss before (the target's distribution and argmax recomputed at every step over padded copies), after
# (computed once per batch, read as shifted views), and after with --compile_loss true (each step's cross-entropy
# compiled by inductor): stage 18's CPU recipe, 8 optimizer steps of which the last 5 profiled (the compilation
# falls in the first, unprofiled), arms interleaved, alone. OLD is a checkout of the commit before the change
# (git worktree add /tmp/old cc6ee27); python puts the script's folder and then PYTHONPATH before the editable
# install, so OLD's package is the one run.
set -euo pipefail
OLD=${OLD:-/tmp/old}
OUT=${OUT:-/tmp/loss_once}
ROUNDS=${ROUNDS:-2}
args=(--config trainers/recipes/eagle3_smollm2_stage18_cpu.yaml --max_steps 8 --max_train_minutes 20 --profile_steps 5
      --num_conversations 48 --heldout_path "" --save_strategy no --report_to none)
for round in $(seq 1 "$ROUNDS"); do
  PYTHONPATH="$OLD" python "$OLD/trainers/eagle3.py" "${args[@]}" --output_dir "$OUT/old_$round" > "$OUT/old_$round.log" 2>&1
  python trainers/eagle3.py "${args[@]}" --output_dir "$OUT/once_$round" > "$OUT/once_$round.log" 2>&1
  python trainers/eagle3.py "${args[@]}" --compile_loss true --output_dir "$OUT/compiled_$round" \
      > "$OUT/compiled_$round.log" 2>&1
  head -n 1 "$OUT"/{old,once,compiled}_"$round"/step_profile.txt
done
