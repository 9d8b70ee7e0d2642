#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 53): the drafter's first step of a cycle computes its head on the last row only
# (StaticDraftSteps.run(last_row_only=True)). The same race as lookup_profile.sh's bench, on session 52's profile
# (same recommendation: LookupFirstPolicy 1/4/2 with a 1-token branch), so the two runs compare method by method;
# per-cycle draft times are now in the JSON (draft_times). About 40 minutes alone on 2 cores. Run alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2
P=$O/profile_bf16_compiled_buckets2348_lookup.json
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3-lookup-first+lookup+sized,eagle3@0/4/1+lookup+sized,eagle3@1/4/2+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $P \
    --markdown $O/last_row_head_specbench13_bf16_compiled_avx2.md --json $O/last_row_head_specbench13_bf16_compiled_avx2.json \
    > $O/last_row_head_specbench13_bf16_compiled_avx2.log 2>&1
