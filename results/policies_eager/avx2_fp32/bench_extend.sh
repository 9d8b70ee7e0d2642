#!/usr/bin/env bash
# Session 60: run B (bench.sh with POLICIES=retrained, Spec-Bench 13 x 1, session 59) extended to the first three
# questions of each category (13 x 3). The progress file starts as a copy of run B's, so --resume keeps its 13
# questions and runs the 26 others with the same settings (the same policy folders: retrain.sh's artifacts, whose
# weights are the shipped defaults'). Each question's methods still run interleaved; ratios are paired per question.
# About 40 minutes alone. Session 60's first pass timed questions 82 and 83 while unit tests ran beside it (stock's
# turns took twice their time): their records were moved to *.overlapped_q82_q83.jsonl and the script run again,
# which, resuming, timed those two questions alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_eager/avx2_fp32
P=$O/profile_fp32_eager.json
RUN_B=$O/retrained_specbench13_fp32_eager_avx2.progress.jsonl
NAME=$O/retrained_specbench39_fp32_eager_avx2
[ -f $NAME.progress.jsonl ] || cp $RUN_B $NAME.progress.jsonl
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 3 \
    --methods "stock,eagle3+lookup,eagle3-ltd+lookup,eagle3-radar+lookup,eagle3-resps+lookup" \
    --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P \
    --ltd_policy artifacts/ltd-smollm2-fp32-eager --radar_policy artifacts/radar-smollm2-fp32-eager \
    --resps_policy artifacts/resps-smollm2-fp32-eager --resume \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
