#!/usr/bin/env bash
# A/B of the decoding path: session 80's last commit (8d9b147) against this session's (926cace), one after the other,
# each an interleaved run of stock-compiled+sized and LookupFirstPolicy 2/4/8 + branch on Spec-Bench 13 x 1.
set -u
for side in old new; do
  cd /tmp/ab_$side
  /work/main/.venv/bin/python -m hf_adaptive_spec bench --questions /work/shared/data/spec_bench/question.jsonl \
    --per-category 1 --methods "stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized" \
    --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
    --no_fp32_agreement --tree_profile results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json \
    --verify_buckets 2,5,8,12,16,32 --markdown /tmp/ab/$side.md --json /tmp/ab/$side.json > /tmp/ab/$side.log 2>&1
  echo "$side rc=$?" >> /tmp/ab/done.txt
done
