#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 57): profile_refit.sh's profile (a later draft level timed as deep minus
# one-level cycles) recommends the tree 1/4/4 with the 4-token branch where session 55's recommended 2/4/8; this runs
# both live with the RADAR now shipped for the float32 curve (picked by the bench itself: no --radar_policy) and eager
# stock, Spec-Bench 13 x 1, compiled float32. About 20 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2_fp32
P=$O/profile_fp32_compiled_levels.json
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock,eagle3@2/4/8+lookup+sized,eagle3@1/4/4+lookup+sized,eagle3-radar+lookup+sized" \
    --compile --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P \
    --markdown $O/levels_specbench13_fp32_compiled_avx2.md --json $O/levels_specbench13_fp32_compiled_avx2.json \
    > $O/levels_specbench13_fp32_compiled_avx2.log 2>&1
