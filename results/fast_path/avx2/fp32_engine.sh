#!/usr/bin/env bash
# Session 55 on the AVX2-only EPYC: the engine in float32, where a verification bucket of 8 costs 1.12x one of 2
# inside generate (session 50's profile), against eager and compiled float32 stock, identity checked against eager
# float32 stock. Compared with compiled bfloat16 stock through the eager float32 stock both runs time (fp32_peer.sh's
# stock-fp32 row). About 25 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/fast_path/avx2
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock,stock-compiled+sized,eagle3+lookup+sized,eagle3+sized" \
    --compile --dtype float32 --reference stock --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --markdown $O/fp32_engine_specbench13_avx2.md --json $O/fp32_engine_specbench13_avx2.json \
    > $O/fp32_engine_specbench13_avx2.log 2>&1
