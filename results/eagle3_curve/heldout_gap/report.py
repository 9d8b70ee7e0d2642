"""Summarise gap.py's JSON: live τ, the held-out measure and the walk, by category and overall.

python results/eagle3_curve/heldout_gap/report.py results/eagle3_curve/heldout_gap/gap_stage15.json
"""
import collections, json, sys

rows = json.load(open(sys.argv[1]))["rows"]
by = collections.defaultdict(lambda: collections.Counter())
for r in rows:
    for key in (r["category"], "all"):
        c = by[key]
        c["live_tokens"] += sum(r["live_accepted"]) + len(r["live_accepted"])
        c["live_cycles"] += len(r["live_accepted"])
        c["live_first"] += sum(a > 0 for a in r["live_accepted"])
        c["held_tokens"] += sum(r["chains"]) + len(r["chains"])
        c["held_positions"] += len(r["chains"])
        c["held_first"] += r["first_draft_hits"]
        c["walk_tokens"] += sum(r["walked"]) + len(r["walked"])  # HeldOutCounts.cycles: the decoding walk
        c["walk_cycles"] += len(r["walked"])
        c["questions"] += 1
print("| category | questions | live τ | walk τ | held-out measure τ | live first-draft acceptance | held-out first-draft acceptance |")
print("|---|---|---|---|---|---|---|")
for key, c in sorted(by.items(), key=lambda kv: (kv[0] == "all", kv[0])):
    print(f"| {key} | {c['questions']} | {c['live_tokens'] / c['live_cycles']:.3f} | {c['walk_tokens'] / c['walk_cycles']:.3f} | "
          f"{c['held_tokens'] / c['held_positions']:.3f} | {c['live_first'] / c['live_cycles']:.3f} | "
          f"{c['held_first'] / c['held_positions']:.3f} |")
same = sum(r["walked"] == r["live_accepted"] for r in rows)
print(f"\nturns where the walk equals generate's accepted lengths cycle by cycle: {same} of {len(rows)}")
