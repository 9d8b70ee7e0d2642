#!/usr/bin/env bash
# Session 67, the AVX-512 bfloat16 EPYC: MT-bench 8 x 2 (16 questions, both turns), 128 tokens, compiled bfloat16,
# caches sized per call, interleaved per question, float32 agreement on: the peer stock-compiled+sized; the best static
# tree (LookupFirstPolicy 2/4/8 + 4-token branch); transformers' two heuristics (+2/-1 schedule, confidence threshold)
# with the branch; the LTD shipped now for this curve (lookup_first; no --ltd_policy: SHIPPED_FOR_CURVE's variant).
# About 25 minutes alone. RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source results/policies_compiled/avx512_bf16/interleaved_bench.sh
METHODS="stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-heuristic+lookup+sized"
METHODS+=",eagle3-confidence+lookup+sized,eagle3-ltd+lookup+sized"
interleaved_bench ../shared/data/mt_bench/question.jsonl 2 lookup_first_mtbench16_bf16_compiled_avx512
echo DONE
