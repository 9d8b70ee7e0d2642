#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 52): the package picks the prompt-lookup branch from the profile.
# 1. `profile --lookup-tokens 0,1,2,4` times the compiled bfloat16 curve (buckets 2,3,4,8) and ranks every tree of the
#    shipped drafter's recording with each branch length, the branch alone (depth 0) included;
#    and each drafted tree also as LookupFirstPolicy (drafted only where the branch did not match);
# 2. the bench takes the tree and the branch from that profile (--tree_profile, no --lookup_tokens) for
#    eagle3-lookup-first+lookup and races it, interleaved, against compiled stock, eager stock, the branch alone
#    (eagle3@0/4/1+lookup) and the drafter's best tree without the branch (eagle3@1/4/2).
# About 60 minutes alone on 2 cores. Needs the recording of run.sh (artifacts/replay/heldout-d6k4-shipped). Run alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx2
REC=artifacts/replay/heldout-d6k4-shipped
P=$O/profile_bf16_compiled_buckets2348_lookup.json
test -f $P || .venv/bin/hf-adaptive-spec profile --dtype bfloat16 --compile --num-threads 2 --context-length 256 \
    --cache-slots 512 --repeats 15 --verify-tokens 1,2,3,4,8 --buckets 2,3,4,8 --recording $REC \
    --lookup-tokens 0,1,2,4 --json $P > $O/profile_lookup.log 2>&1
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
    --methods "stock-compiled+sized,eagle3-lookup-first+lookup+sized,eagle3@0/4/1+lookup+sized,eagle3@1/4/2+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --tree_profile $P \
    --markdown $O/profile_lookup_specbench13_bf16_compiled_avx2.md --json $O/profile_lookup_specbench13_bf16_compiled_avx2.json \
    > $O/profile_lookup_specbench13_bf16_compiled_avx2.log 2>&1
