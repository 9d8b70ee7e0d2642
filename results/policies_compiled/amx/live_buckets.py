"""Each bucket's verification per cycle as the bench's cycles measured it (their `verify_times`, kept since session
63), against what the profile charges; and how often each method's cycles fell in each bucket.

    python results/policies_compiled/amx/live_buckets.py
"""

import collections
import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
profile = json.loads((HERE / "profile_bf16_compiled_amx.json").read_text())
buckets = profile["buckets"]
charged = dict(zip(buckets, profile["bucket_seconds"]))
by_method = collections.defaultdict(lambda: collections.defaultdict(list))
for line in (HERE / "specbench13_bf16_compiled_amx.progress.jsonl").read_text().splitlines()[1:]:
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
