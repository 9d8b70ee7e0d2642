#!/usr/bin/env bash
# Session 64, the 2-core AVX-512 bfloat16 EPYC (run.sh's machine): issue 31's and 32's rows on the compiled bfloat16
# path, one interleaved run against transformers' own fast path in caches sized per call (stock-compiled+sized, the
# reference), eager bfloat16 stock (stock) and eager float32 stock (the agreement's answers, row stock-fp32):
# run.sh's profile tree (2/4/8, the default) with and without the 4-token prompt-lookup branch,
# transformers' +2/-1 length schedule, the three policies retrained on this machine's profile (run.sh) and the
# shipped RADAR (trained on the AVX2 EPYC's eager float32 curve; each call reports it) as the candidate.
# The profile's buckets (2,8,12,16,32) for every engine method. Spec-Bench 13 x PER (default 1), 128 tokens;
# RESUME=1 continues the progress file. About 30 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx512_bf16
NAME=$O/specbench13_bf16_compiled_avx512
N=bf16-compiled-avx512
PER=${PER:-1}
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category $PER \
    --methods "stock-compiled+sized,eagle3+sized,eagle3+lookup+sized,eagle3-heuristic+lookup+sized,eagle3-ltd+lookup+sized,eagle3-radar+lookup+sized,eagle3-resps+lookup+sized,eagle3-candidate-policy+lookup+sized" \
    --ltd_policy artifacts/ltd-smollm2-$N --radar_policy artifacts/radar-smollm2-$N --resps_policy artifacts/resps-smollm2-$N \
    --candidate_policy hf_adaptive_spec/checkpoints/radar-smollm2-135m-instruct \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $O/profile_bf16_compiled_avx512.json "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
