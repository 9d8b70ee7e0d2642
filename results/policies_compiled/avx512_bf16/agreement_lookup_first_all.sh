#!/usr/bin/env bash
# Session 68, the AVX-512 bfloat16 EPYC: the float32 agreement of the lookup-first RADAR and Re-SpS (trained on all 100
# held-out 2-turn conversations) beside LookupFirstPolicy 2/4/8 + 4-token branch, eager bf16 stock and the compiled
# peer. Spec-Bench 13 x 1, 128 tokens, compiled bfloat16, float32 agreement on (each turn's float32 stock answer is
# generated and timed as `stock-fp32`). Run beside a CI run in session 68: read its agreement and tau, not its speeds.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source results/policies_compiled/avx512_bf16/interleaved_bench.sh
N=bf16-compiled-avx512-lookup-first-100
METHODS="stock,stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized"
METHODS+=",eagle3-radar+lookup+sized,eagle3-resps+lookup+sized"
interleaved_bench ../shared/data/spec_bench/question.jsonl 1 lookup_first_all_agreement_specbench13_bf16_compiled_avx512 \
    --radar_policy artifacts/radar-smollm2-$N --resps_policy artifacts/resps-smollm2-$N
echo DONE
