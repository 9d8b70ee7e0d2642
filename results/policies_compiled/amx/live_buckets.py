"""Each bucket's verification per cycle as the bench's cycles measured it (their `verify_times`, kept since session
63), against what the profile charges; and how often each method's cycles fell in each bucket.

    python results/policies_compiled/amx/live_buckets.py [PROFILE PROGRESS]

Default: session 63's AMX profile and Spec-Bench run, next to this file; session 64 passed the AVX-512 EPYC's
(results/policies_compiled/avx512_bf16/live_buckets.log).
"""

import collections
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).parent
profile_path, progress_path = (
    sys.argv[1:3] if len(sys.argv) == 3
    else (HERE / "profile_bf16_compiled_amx.json", HERE / "specbench13_bf16_compiled_amx.progress.jsonl")
)
profile = json.loads(Path(profile_path).read_text())
buckets = profile["buckets"]
charged = dict(zip(buckets, profile["bucket_seconds"]))
by_method = collections.defaultdict(lambda: collections.defaultdict(list))
for line in Path(progress_path).read_text().splitlines()[1:]:
    record = json.loads(line)
    for turn in record["turns"]:
        for size, seconds in zip(turn["verified_tokens"] or [], turn["verify_times"] or [], strict=True):
            by_method[record["method"]][next(b for b in buckets if b >= size)].append(seconds)
pooled = collections.defaultdict(list)
for cycles in by_method.values():
    for bucket, seconds in cycles.items():
        pooled[bucket] += seconds
print("bucket | cycles | live median per cycle | the profile charges")
for bucket in sorted(pooled):
    live = 1000 * statistics.median(pooled[bucket])
    print(f"{bucket} | {len(pooled[bucket])} | {live:.1f} ms | {1000 * charged[bucket]:.1f} ms")
for method, cycles in by_method.items():
    total = sum(len(v) for v in cycles.values())
    shares = ", ".join(f"bucket {b}: {len(v) / total:.0%} ({1000 * statistics.median(v):.1f} ms)" for b, v in sorted(cycles.items()))
    print(f"{method}: {shares}")
