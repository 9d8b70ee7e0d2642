#!/usr/bin/env bash
# Session 55 on the AVX2-only EPYC: the engine in float32 (lossless: the float32 answers) against compiled bfloat16
# stock and the bfloat16 recommendation, in one interleaved bfloat16 run (+fp32: the method on the run's float32 copy
# of the model, default buckets 8,12,16,32). The catch-up profile sets the bfloat16 methods' tree, buckets and 1-token
# branch; the float32 engine runs fp32_engine.sh's fastest configuration (tree 2/4/8, a 4-token branch: +lookup4).
# Compiled float32 stock runs beside them. About 30 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/fast_path/avx2
P=results/policies_compiled/avx2/profile_bf16_compiled_buckets2348_catch_up.json
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3-lookup-first+lookup+sized,eagle3@2/4/8+lookup4+sized+fp32,stock-compiled+sized+fp32" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $P \
    --markdown $O/fp32_engine_vs_bf16_specbench13_avx2.md --json $O/fp32_engine_vs_bf16_specbench13_avx2.json \
    > $O/fp32_engine_vs_bf16_specbench13_avx2.log 2>&1
