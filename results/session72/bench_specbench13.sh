#!/usr/bin/env bash
# Session 72: the shipped configuration re-measured on the unchanged decoding path, with float32 agreement on:
# Spec-Bench 13 x 1, compiled bfloat16, 128 tokens, the bucket-5 profile, interleaved per question; peers eager
# bfloat16 stock, eager float32 stock and stock-compiled+sized; LookupFirstPolicy 2/4/8 + branch and the shipped LTD.
set -euo pipefail
cd "$(dirname "$0")/../.."
source results/policies_compiled/avx512_bf16/interleaved_bench.sh
O=results/session72
METHODS="stock,stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-ltd+lookup+sized"
interleaved_bench ../shared/data/spec_bench/question.jsonl 1 specbench13_bf16_compiled_avx512 \
    --tree_profile results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512_bucket5.json
echo DONE
