"""Session 66: paired speed against 1/4/4 + branch by turn (first turns of all 130 questions, second turns of the 10
MT-bench-category ones) in the turns2 Spec-Bench 13 x 10 run (log: turns2_by_turn.log); session 67 passes its own
run's progress file and base method (log: lookup_first_by_turn.log):

    python results/policies_compiled/avx512_bf16/turns2_by_turn.py [PROGRESS_JSONL BASE_METHOD]
"""
import sys
from collections import defaultdict

from hf_adaptive_spec.bench.progress import read_progress

PROGRESS, BASE = sys.argv[1:3] if len(sys.argv) == 3 else (
    "results/policies_compiled/avx512_bf16/turns2_specbench130_bf16_compiled_avx512.progress.jsonl",
    "eagle3@1/4/4+lookup+sized",
)
records = read_progress(PROGRESS)[1]
totals = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))  # method -> turn -> [tokens, seconds]
for record in records.values():
    for turn, result in enumerate(record.turns):
        totals[record.method][turn][0] += result.new_tokens
        totals[record.method][turn][1] += result.wall_time
for method, turns in totals.items():
    print(f"{method:45s} " + "  ".join(
        f"turn {t + 1}: {n / s:.1f} tok/s ({(n / s) / (totals[BASE][t][0] / totals[BASE][t][1]):.3f}x {BASE})"
        for t, (n, s) in sorted(turns.items())))
