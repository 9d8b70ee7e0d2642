"""Session 98 (2-core Intel Xeon, PyTorch AVX512, no AVX512-BF16/AMX): float32 engine variants against the float32
profile's recommendation (StaticTreePolicy 2/4/8 + 4-token prompt-lookup branch), compiled, buckets 2,3,5,8,12,16,32,
Spec-Bench first turns (PER per category), 128 tokens, greedy. Every method runs every prompt once untimed first (so
no compile lands in a timed call), then the timed calls, method order rotated per prompt. Prints tok/s, tau, the
total and per-prompt median time ratio against the recommendation, a 95% bootstrap interval of the median and whether
each method's tokens equal the recommendation's (float32: they must).

    python results/session98/ab_fp32_variants.py 2   # 13 x 2
"""

import random
import statistics
import sys
import time
from pathlib import Path

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.bench.conversation import turn_prompt_ids
from hf_adaptive_spec.bench.questions import load_questions

torch.set_num_threads(2)
PER = int(sys.argv[1]) if len(sys.argv) > 1 else 2
model, tok = hfas.load_default_model(dtype=torch.float32)
hfas.enable(model)
hfas.fast_path(model, buckets=(2, 3, 5, 8, 12, 16, 32))
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
questions = load_questions(Path("../shared/data/spec_bench/question.jsonl"), per_category=PER)
prompts = [turn_prompt_ids(tok, question.turns, []) for question in questions]  # first turns, as the bench builds them
BASE = "tree 2/4/8 + branch 4"
methods = {
    BASE: (hfas.StaticTreePolicy(2, 4, 8), 4),
    "LookupFirstPolicy 2/4/8 + branch 4": (hfas.LookupFirstPolicy(2, 4, 8), 4),
    "LookupFirstPolicy 3/4/8 + branch 4": (hfas.LookupFirstPolicy(3, 4, 8), 4),
    "tree 2/4/8 + branch 6": (hfas.StaticTreePolicy(2, 4, 8), 6),
    "tree 2/4/8 + branch 8": (hfas.StaticTreePolicy(2, 4, 8), 8),
    "tree 3/4/8 + branch 4": (hfas.StaticTreePolicy(3, 4, 8), 4),
}
common = dict(max_new_tokens=128, do_sample=False, cache_implementation="static",
              compile_config=hfas.fast_path_compile_config(model.device), return_dict_in_generate=True)


def run(name, ids):
    policy, lookup = methods[name]
    start = time.perf_counter()
    out = model.generate(ids, assistant_model=drafter, assistant_policy=policy, prompt_lookup_num_tokens=lookup,
                         **common)
    stats = out.speculation
    tokens = out.sequences[0, ids.shape[1]:].tolist()
    return time.perf_counter() - start, tokens, (stats.cycles, stats.mean_accepted_tokens)


for ids in prompts:  # untimed: every shape each method meets is compiled or loaded here
    for name in methods:
        run(name, ids)
timed = {name: [] for name in methods}
for index, ids in enumerate(prompts):
    names = list(methods)[index % len(methods):] + list(methods)[: index % len(methods)]
    for name in names:
        timed[name].append(run(name, ids))
rng = random.Random(0)
for name, runs in timed.items():
    tokens, seconds = sum(len(r[1]) for r in runs), sum(r[0] for r in runs)
    tau = sum(r[2][0] * r[2][1] for r in runs) / sum(r[2][0] for r in runs)
    ratios = [b[0] / r[0] for b, r in zip(timed[BASE], runs)]
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
    same = sum(r[1] == b[1] for r, b in zip(runs, timed[BASE]))
    print(f"{name:36s} {tokens / seconds:5.1f} tok/s  tau {tau:.2f}  x base: total "
          f"{sum(r[0] for r in timed[BASE]) / seconds:.3f}, median {statistics.median(ratios):.3f} "
          f"[{medians[50]:.3f}-{medians[1949]:.3f}], faster in {sum(x > 1 for x in ratios)} of {len(runs)}; "
          f"same tokens {same}/{len(runs)}", flush=True)
