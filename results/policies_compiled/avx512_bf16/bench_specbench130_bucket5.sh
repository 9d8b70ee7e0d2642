#!/usr/bin/env bash
# Session 70, the AVX-512 bfloat16 EPYC: issue 32's own measurement (Spec-Bench 13 x 10, all 80 MT-bench questions
# with both turns among them) for what ships on this curve, in session 69's profile buckets (2,5,8,12,16,32;
# profile_bucket5.sh): the peer stock-compiled+sized; the profile's recommendation LookupFirstPolicy 2/4/8 + 4-token
# branch (the best static tree); transformers' +2/-1 length schedule with the branch (the faster of its two
# heuristics in session 65's 13 x 10: 2.04x against the confidence threshold's 1.81x); the shipped lookup-first LTD
# and RADAR. 128 tokens, compiled bfloat16, caches sized per call, interleaved per question, float32 agreement off
# (session 68 measured it for these trees). About 60 minutes alone. PER_CATEGORY (default 10); RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source results/policies_compiled/avx512_bf16/interleaved_bench.sh
METHODS="stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-heuristic+lookup+sized"
METHODS+=",eagle3-ltd+lookup+sized,eagle3-radar+lookup+sized"
interleaved_bench ../shared/data/spec_bench/question.jsonl "${PER_CATEGORY:-10}" bucket5_specbench130_bf16_compiled_avx512 \
    --no_fp32_agreement --tree_profile $O/profile_bf16_compiled_avx512_bucket5.json  # replaces the sourced default
echo DONE
