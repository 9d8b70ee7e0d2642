#!/usr/bin/env bash
# Session 95, a 2-core Intel Xeon with AMX: issue 32 with LTD and RADAR retrained on this machine's compiled bfloat16
# curve (retrain_amx.sh). Spec-Bench 13 x 10 (its first 80 questions are MT-bench's 80: `paired --categories` gives
# MT-bench), interleaved per question: the peer stock-compiled+sized (and eager bfloat16 stock, always run); the best
# static tree, LookupFirstPolicy 2/4/8 + 4-token branch; transformers' +2/-1 heuristic with the branch (the best
# heuristic in session 94; its confidence threshold ran 0.80x the tree there); the shipped LTD (trained on the AVX-512
# EPYC's curve, eagle3-ltd) beside LTD retrained here (eagle3-candidate-policy, --candidate_policy), and RADAR retrained
# here (--radar_policy), each with the branch it was trained with. Same settings as session 94's
# bench_issue32_amx.sh: 128 tokens, compiled bfloat16, caches sized per call, the profile's buckets, float32 agreement
# off. About 70 minutes alone. PER_CATEGORY (default 10); RESUME=1 resumes.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session95
NAME=$O/amx_policies_specbench130_bf16_compiled_amx
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
METHODS="stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized,eagle3-heuristic+lookup+sized"
METHODS+=",eagle3-ltd+lookup+sized,eagle3-candidate-policy+lookup+sized,eagle3-radar+lookup+sized"
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl \
    --per-category "${PER_CATEGORY:-10}" --methods "$METHODS" \
    --candidate_policy artifacts/ltd-smollm2-bf16-compiled-amx-lookup-first-100 \
    --radar_policy artifacts/radar-smollm2-bf16-compiled-amx-lookup-first-100 \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json \
    --verify_buckets 2,5,8,12,16,32 --no_fp32_agreement "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
