#!/usr/bin/env bash
# Session 93, a 2-core Intel Xeon with AMX: the decoding path after this session's changes (a sampled tree's rows
# torch cannot draw from refused on its error path; rows checked floating point; ids mapped through the checked
# draft_to_target) and the bench's new checks before loading, with the packages of the
# default cache: session 91's command (results/session91/bench_13_amx.sh), to compare tokens turn by turn with its run
# (results/session84/same_tokens.py) and the ratios. About 7 minutes alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session93
NAME=$O/specbench13_agreement_bf16_compiled_amx
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json \
    --verify_buckets 2,5,8,12,16,32 "${RESUME_ARGS[@]}" \
    --markdown $NAME.md --json $NAME.json >> $NAME.log 2>&1
echo DONE >> $NAME.log
