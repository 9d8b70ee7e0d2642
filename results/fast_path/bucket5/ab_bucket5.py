"""A bucket for the lookup-first cycle (1 + 4-token chain = 5 tokens) against padding it to 8, A/B interleaved.

Session 69, the AVX-512 bfloat16 EPYC. One model, one drafter, two ``FastPath`` objects swapped in per call (as
``buckets_experiment.py`` does): A verifies in the profile's buckets 2,8,12,16,32, B adds 5. Both run
``LookupFirstPolicy`` 2/4/8 with the 4-token prompt-lookup branch, compiled bfloat16, the engine's own cache sized per
call (``cache_implementation="static"``), 128 new tokens, greedy; the first turns of Spec-Bench's first PER questions
per category; the order A/B alternates per prompt; compile time is taken out of each call. Prints per-prompt and
total tokens/s, the paired ratio B/A (median, bootstrap over prompts) and whether the two give the same tokens.
Usage: PER=2 .venv/bin/python results/fast_path/bucket5/ab_bucket5.py
"""
import json
import os
import random
import statistics
import time

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.generation.static_path import FastPath

torch.set_num_threads(2)
PER = int(os.environ.get("PER", "2"))
model, tok = hfas.load_default_model(dtype=torch.bfloat16)
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
policy = hfas.LookupFirstPolicy(depth=2, top_k=4, total_tokens=8)
paths = {"A": FastPath(model, (2, 8, 12, 16, 32)), "B": FastPath(model, (2, 5, 8, 12, 16, 32))}
config = hfas.fast_path_compile_config(model.device)

questions, seen = [], {}
for line in open("../shared/data/spec_bench/question.jsonl"):
    q = json.loads(line)
    if seen.get(q["category"], 0) < PER:
        seen[q["category"]] = seen.get(q["category"], 0) + 1
        questions.append(q)


def run(ids, name):
    model._hf_adaptive_spec_fast_path = paths[name]
    tick = time.perf_counter()
    out = model.generate(ids, max_new_tokens=128, do_sample=False, assistant_model=drafter, assistant_policy=policy,
                         prompt_lookup_num_tokens=4, cache_implementation="static", compile_config=config,
                         return_dict_in_generate=True)
    seconds = time.perf_counter() - tick - out.speculation.compile_time
    return out.sequences[0, ids.shape[1]:].tolist(), seconds, out.speculation


def prompt_ids(q):
    return tok.apply_chat_template([{"role": "user", "content": q["turns"][0]}], add_generation_prompt=True,
                                   return_tensors="pt", return_dict=True)["input_ids"]


warm = prompt_ids(questions[0])
for name in paths:
    for _ in range(2):
        run(warm, name)
rows = []
for i, q in enumerate(questions):
    ids = prompt_ids(q)
    result = {}
    for name in (["A", "B"] if i % 2 == 0 else ["B", "A"]):
        run(ids, name)  # untimed: a new prompt length may compile a graph or load a package
        result[name] = run(ids, name)
    (ta, sa, st_a), (tb, sb, st_b) = result["A"], result["B"]
    rows.append((len(ta) / sa, len(tb) / sb, len(ta), sa, len(tb), sb, ta == tb, st_a.mean_accepted_tokens))
    print(f"{q['question_id']:>4} {q['category']:<15} A {len(ta) / sa:6.1f} tok/s  B {len(tb) / sb:6.1f} tok/s  "
          f"B/A {(len(tb) / sb) / (len(ta) / sa):.3f}  same tokens {ta == tb}  tau {st_a.mean_accepted_tokens:.2f}",
          flush=True)
ratios = [b / a for a, b, *_ in rows]
total_a = sum(r[2] for r in rows) / sum(r[3] for r in rows)
total_b = sum(r[4] for r in rows) / sum(r[5] for r in rows)
random.seed(0)
boot = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(2000))
print(f"total A {total_a:.1f} tok/s, B {total_b:.1f} tok/s, B/A {total_b / total_a:.3f}; median B/A "
      f"{statistics.median(ratios):.3f} [95% bootstrap {boot[50]:.3f}-{boot[1949]:.3f}], B faster in "
      f"{sum(r > 1 for r in ratios)} of {len(ratios)}; same tokens in {sum(r[6] for r in rows)} of {len(rows)}")
