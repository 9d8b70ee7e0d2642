#!/usr/bin/env bash
# Session 67, the AVX-512 bfloat16 EPYC: does LTD with `lookup_first=True` (a matched prompt-lookup chain verified
# alone, nothing drafted; the heads decide the other cycles), trained on the 48-conversation 2-turn held-out
# recording, run at least as fast as the best static tree of session 66, LookupFirstPolicy 2/4/8 + 4-token branch?
# Spec-Bench 13 x 10, 128 tokens, compiled bfloat16, caches sized per call, interleaved per question, fp32 agreement on:
#   the peer stock-compiled+sized; LookupFirstPolicy 2/4/8 + branch; the shipped LTD variant; the lookup-first LTD
#   (candidate policy). About 60 minutes alone. RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source results/policies_compiled/avx512_bf16/interleaved_bench.sh
METHODS="stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-ltd+lookup+sized"
METHODS+=",eagle3-candidate-policy+lookup+sized"
interleaved_bench ../shared/data/spec_bench/question.jsonl 10 lookup_first_specbench130_bf16_compiled_avx512 \
    --candidate_policy artifacts/ltd-smollm2-bf16-compiled-avx512-lookup-first-48
echo DONE
