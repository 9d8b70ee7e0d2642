#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 56): on the float32 compiled curve, the profile's static tree (2/4/8 with
# the 4-token prompt-lookup branch, from --tree_profile), transformers' two heuristics and the three policies
# retrained for this curve (retrain.sh), each with the branch, against eager and compiled float32 stock, identity
# checked against eager float32 stock. Spec-Bench 13 x 1, 128 tokens. Alone on the machine; about 40 minutes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2_fp32
P=results/fast_path/avx2/profile_fp32_compiled_buckets8_12_16_32.json
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock,stock-compiled+sized,eagle3+lookup+sized,eagle3-radar+lookup+sized,eagle3-ltd+lookup+sized,eagle3-resps+lookup+sized,eagle3-heuristic+lookup+sized,eagle3-confidence+lookup+sized" \
    --compile --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 --tree_profile $P \
    --ltd_policy artifacts/ltd-smollm2-fp32-compiled --resps_policy artifacts/resps-smollm2-fp32-compiled \
    --radar_policy artifacts/radar-smollm2-fp32-compiled \
    --markdown $O/policies_specbench13_fp32_compiled_avx2.md --json $O/policies_specbench13_fp32_compiled_avx2.json \
    > $O/policies_specbench13_fp32_compiled_avx2.log 2>&1
