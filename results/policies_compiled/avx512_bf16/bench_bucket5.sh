#!/usr/bin/env bash
# Session 69, the AVX-512 bfloat16 EPYC: the lookup-first methods verified in session 69's profile buckets
# (2,5,8,12,16,32: the 5-token bucket for the cycles that verify the 4-token chain alone; profile_bucket5.sh) against
# the compiled peer. Spec-Bench 13 x PER_CATEGORY (default 5), 128 tokens, compiled bfloat16, caches sized per call,
# interleaved per question, float32 agreement off (the bucket changes the padding, not the tokens: the A/B gave the
# same tokens in 65 of 65 prompts). The shipped lookup-first LTD and RADAR. RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source results/policies_compiled/avx512_bf16/interleaved_bench.sh
METHODS="stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-ltd+lookup+sized,eagle3-radar+lookup+sized"
interleaved_bench ../shared/data/spec_bench/question.jsonl "${PER_CATEGORY:-5}" bucket5_specbench_bf16_compiled_avx512 \
    --no_fp32_agreement --tree_profile $O/profile_bf16_compiled_avx512_bucket5.json  # replaces the sourced default
echo DONE
