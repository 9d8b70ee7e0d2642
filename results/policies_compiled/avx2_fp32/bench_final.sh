#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 58): the corrected profile's recommendation (static tree 1/4/4 + the
# 4-token branch) live against the tree 2/4/8, LTD retrained on the corrected profile (artifacts/ltd-smollm2-fp32-levels,
# replay 0.997x the recommendation), the RADAR shipped for the float32 curve (picked by the bench), and both peers:
# eager float32 stock and compiled float32 stock on a sized static cache. Spec-Bench 13 x 2, compiled float32, 128
# tokens. About 60 minutes alone. Session 58 stopped it after 6 questions (log and progress kept as *.stopped6.*).
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2_fp32
P=$O/profile_fp32_compiled_levels.json
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 2 \
    --methods "stock,stock-compiled+sized,eagle3@1/4/4+lookup+sized,eagle3@2/4/8+lookup+sized,eagle3-ltd+lookup+sized,eagle3-radar+lookup+sized" \
    --compile --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P \
    --ltd_policy artifacts/ltd-smollm2-fp32-levels \
    --markdown $O/final_specbench26_fp32_compiled_avx2.md --json $O/final_specbench26_fp32_compiled_avx2.json \
    > $O/final_specbench26_fp32_compiled_avx2.log 2>&1
