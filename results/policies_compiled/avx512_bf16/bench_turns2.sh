#!/usr/bin/env bash
# Session 66, the AVX-512 bfloat16 EPYC: does a profile recording that holds second turns (`record --turns 2`) pick
# what runs fastest live? Spec-Bench 13 x 10, 128 tokens, compiled bfloat16, caches sized per call, interleaved per
# question, float32 agreement on:
#   the peer stock-compiled+sized; the best static tree of session 65's 13 x 10 (1/4/4 + 4-token branch);
#   LookupFirstPolicy 2/4/8 + branch (the profile's ranking on first + second turns, 1.03x both trees modelled);
#   the shipped LTD variant (trained on first turns only); LTD retrained on the 2-turn recording (candidate policy).
# About 70 minutes alone. RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source results/policies_compiled/avx512_bf16/interleaved_bench.sh
METHODS="stock-compiled+sized,eagle3@1/4/4+lookup+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-ltd+lookup+sized"
METHODS+=",eagle3-candidate-policy+lookup+sized"
interleaved_bench ../shared/data/spec_bench/question.jsonl 10 turns2_specbench130_bf16_compiled_avx512 \
    --candidate_policy artifacts/ltd-smollm2-bf16-compiled-avx512-2turns
echo DONE
