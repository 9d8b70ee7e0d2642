#!/usr/bin/env bash
# Session 64, after bench.sh: live, the retrained LTD ran 1.138x the profile's tree 2/4/8 + branch on Spec-Bench
# 13 x 1 (paired median 1.084x) where the replay of the held-out ShareGPT prompts said 1.016x, with each bucket
# priced within 1-5% of the bench's own cycles (live_buckets.log). Are the prompts the gap? The same replay on a
# recording of Spec-Bench 13 x 1's first turns (benchmark questions: evaluation only, never training).
# About 6 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx512_bf16
REC=artifacts/replay/specbench13-d6k4-shipped
test -d $REC || .venv/bin/hf-adaptive-spec record --output $REC --questions ../shared/data/spec_bench/question.jsonl \
    --per-category 1 --shard-size 13 --depth 6 --top-k 4 --total-tokens 16 --max-new-tokens 128 --num-threads 2 \
    > $O/record_specbench13.log 2>&1
.venv/bin/python results/policies_compiled/replay_recommend.py --recording $REC --profile $O/profile_bf16_compiled_avx512.json \
    --policy-name bf16-compiled-avx512 --lookup-tokens 0,4 > $O/replay_recommend_specbench13.log 2>&1
echo DONE
