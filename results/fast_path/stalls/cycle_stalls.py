"""Session 71. Are there stalls worth removing (garbage collection, allocator, the OS) in the compiled path's cycles?
From a bench report's per-cycle times (`draft_times`, `verify_times`), grouped by what the cycle did (draft levels;
tokens verified): each group's median, p90, p99 and max, and the time its cycles spent above twice the group's median,
as a share of the method's wall time: the most that removing every such stall could save.

    python results/fast_path/stalls/cycle_stalls.py results/policies_compiled/avx512_bf16/bucket5_specbench130_bf16_compiled_avx512.json
"""
import json
import statistics
import sys
from collections import defaultdict

report = json.load(open(sys.argv[1]))
times = defaultdict(lambda: defaultdict(list))
wall = defaultdict(float)
for record in report["records"]:
    for turn in record["turns"]:
        if not turn.get("draft_times") or not turn.get("verify_times"):
            continue
        wall[record["method"]] += turn["wall_time"]
        cycles = zip(turn["draft_times"], turn["draft_depths"], turn["verify_times"], turn["verified_tokens"])
        for draft, depth, verify, verified in cycles:
            times[record["method"]][("draft levels", depth)].append(draft)
            times[record["method"]][("verify tokens", verified)].append(verify)
print("| method | cycle | cycles | median ms | p90 | p99 | max | cycles > 2x median | time above 2x median, % of wall |")
print("|---|---|---|---|---|---|---|---|---|")
for method, groups in times.items():
    excess_in_all = 0.0
    for (kind, size), values in sorted(groups.items()):
        values = sorted(values)
        if len(values) < 200:  # too few for a p99
            continue
        median = statistics.median(values)
        slow = [v for v in values if v > 2 * median]
        excess = sum(v - 2 * median for v in slow)
        excess_in_all += excess
        q = lambda p: 1000 * values[int(p * len(values))]  # noqa: E731
        print(f"| {method} | {kind} {size} | {len(values)} | {1000 * median:.2f} | {q(0.9):.2f} | {q(0.99):.2f} "
              f"| {1000 * values[-1]:.1f} | {len(slow)} | {100 * excess / wall[method]:.2f} |")
    print(f"| {method} | **all** | | | | | | | **{100 * excess_in_all / wall[method]:.2f}** |")
