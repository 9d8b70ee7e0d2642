#!/usr/bin/env bash
# Session 68, the AVX-512 bfloat16 EPYC: RADAR and Re-SpS with `lookup_first`, trained on all 100 held-out 2-turn
# conversations (train_lookup_first_all.sh), against the best static tree LookupFirstPolicy 2/4/8 + 4-token branch and
# the shipped LTD (lookup_first, 48 conversations; LTD retrained on the 100 replayed the same, 1.010x against 1.010x,
# and is left out). Spec-Bench 13 x PER_CATEGORY (default 10; about 45 minutes alone), 128 tokens,
# compiled bfloat16, caches sized per call, interleaved per question; float32 agreement off (a policy comparison:
# sessions 66-67 measured the agreement of these trees). RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source results/policies_compiled/avx512_bf16/interleaved_bench.sh
N=bf16-compiled-avx512-lookup-first-100
METHODS="stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-ltd+lookup+sized"
METHODS+=",eagle3-radar+lookup+sized,eagle3-resps+lookup+sized"
interleaved_bench ../shared/data/spec_bench/question.jsonl "${PER_CATEGORY:-10}" lookup_first_all_specbench_bf16_compiled_avx512 \
    --no_fp32_agreement --radar_policy artifacts/radar-smollm2-$N --resps_policy artifacts/resps-smollm2-$N
echo DONE
