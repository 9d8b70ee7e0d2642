"""Session 66: paired speed against 1/4/4 + branch by turn (first turns of all 130 questions, second turns of the 10
MT-bench-category ones) in the turns2 Spec-Bench 13 x 10 run (log: turns2_by_turn.log):

    python results/policies_compiled/avx512_bf16/turns2_by_turn.py
"""
from collections import defaultdict

from hf_adaptive_spec.bench.progress import read_progress

BASE = "eagle3@1/4/4+lookup+sized"
records = read_progress("results/policies_compiled/avx512_bf16/turns2_specbench130_bf16_compiled_avx512.progress.jsonl")[1]
totals = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))  # method -> turn -> [tokens, seconds]
for record in records.values():
    for turn, result in enumerate(record.turns):
        totals[record.method][turn][0] += result.new_tokens
        totals[record.method][turn][1] += result.wall_time
for method, turns in totals.items():
    print(f"{method:45s} " + "  ".join(
        f"turn {t + 1}: {n / s:.1f} tok/s ({(n / s) / (totals[BASE][t][0] / totals[BASE][t][1]):.3f}x 1/4/4)"
        for t, (n, s) in sorted(turns.items())))
