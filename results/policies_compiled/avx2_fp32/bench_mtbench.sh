#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 56): bench.sh's static tree, RADAR and LTD (retrained for the float32 curve)
# on MT-bench, one question per category (8 questions, 2 turns each), float32 compiled, 128 tokens, identity against
# eager float32 stock. Alone on the machine; about 20 minutes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2_fp32
P=results/fast_path/avx2/profile_fp32_compiled_buckets8_12_16_32.json
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/mt_bench/question.jsonl --per-category 1 \
    --methods "stock,stock-compiled+sized,eagle3+lookup+sized,eagle3-radar+lookup+sized,eagle3-ltd+lookup+sized" \
    --compile --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P \
    --ltd_policy artifacts/ltd-smollm2-fp32-compiled --radar_policy artifacts/radar-smollm2-fp32-compiled \
    --markdown $O/policies_mtbench8_fp32_compiled_avx2.md --json $O/policies_mtbench8_fp32_compiled_avx2.json \
    > $O/policies_mtbench8_fp32_compiled_avx2.log 2>&1
