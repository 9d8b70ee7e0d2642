#!/usr/bin/env bash
# Session 65, the AVX-512 bfloat16 EPYC again: issue 32's own measurement for what ships on this curve, Spec-Bench
# 13 x 10 then MT-bench 8 x 2, 128 tokens, compiled bfloat16, caches sized per call, interleaved per question:
# the peer stock-compiled+sized; the best static tree of session 64's 13 x 3 (1/4/4 + 4-token branch) and the
# profile's tree (2/4/8 + branch); transformers' two heuristics (+2/-1 schedule, confidence threshold) with the
# branch; the shipped LTD as the package picks it for this curve (no --ltd_policy: SHIPPED_FOR_CURVE's
# cpu/bfloat16/compiled variant); the tree without the branch (issue 31's tau at 8 nodes). Float32 agreement on.
# About 95 minutes alone for Spec-Bench, 15 for MT-bench; PART=specbench or PART=mtbench runs one; RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx512_bf16
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
METHODS="stock-compiled+sized,eagle3+sized,eagle3+lookup+sized,eagle3@1/4/4+lookup+sized,eagle3-heuristic+lookup+sized,eagle3-confidence+lookup+sized,eagle3-ltd+lookup+sized"
run() {  # questions file, per category, output name
    .venv/bin/hf-adaptive-spec bench --questions "$1" --per-category "$2" --methods "$METHODS" \
        --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
        --tree_profile $O/profile_bf16_compiled_avx512.json "${RESUME_ARGS[@]}" \
        --markdown $O/$3.md --json $O/$3.json >> $O/$3.log 2>&1
}
[ "${PART:-specbench}" = mtbench ] || run ../shared/data/spec_bench/question.jsonl 10 shipped_specbench130_bf16_compiled_avx512
[ "${PART:-mtbench}" = specbench ] || run ../shared/data/mt_bench/question.jsonl 1 shipped_mtbench8_bf16_compiled_avx512
echo DONE
