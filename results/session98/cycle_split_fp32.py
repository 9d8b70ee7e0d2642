"""Session 98: where a cycle of the float32 engine's time goes on this CPU (the float32 profile's recommendation:
StaticTreePolicy 2/4/8 + 4-token prompt-lookup branch, compiled, the engine's default buckets), Spec-Bench first turns
(PER per category), 128 tokens, greedy; every prompt runs once untimed first. The engine's own steps are wrapped with
timers in this process only (drafting = lookup search + policy + the drafter's levels; verification = the padded
forward; acceptance walk; cache compaction).

    python results/session98/cycle_split_fp32.py 2
"""

import collections
import sys
import time
from pathlib import Path

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.bench.conversation import turn_prompt_ids
from hf_adaptive_spec.bench.questions import load_questions
from hf_adaptive_spec.generation import speculative_decoding, targets

torch.set_num_threads(2)
PER = int(sys.argv[1]) if len(sys.argv) > 1 else 2
seconds, calls = collections.defaultdict(float), collections.defaultdict(int)


def timed_method(owner, name, key):
    method = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        result = method(*args, **kwargs)
        seconds[key] += time.perf_counter() - start
        calls[key] += 1
        return result

    setattr(owner, name, wrapper)


timed_method(speculative_decoding._Decoder, "_draft", "drafting (lookup, policy, drafter levels)")
timed_method(targets.StaticTarget, "verify", "verification forward (padded tree)")
timed_method(speculative_decoding._Decoder, "_accept", "acceptance walk")
timed_method(targets.StaticTarget, "commit", "cache compaction")
timed_method(speculative_decoding._Decoder, "cycle", "whole cycle")
timed_method(targets.StaticTarget, "prefill", "prefill (per call)")
model, tok = hfas.load_default_model(dtype=torch.float32)
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
questions = load_questions(Path("../shared/data/spec_bench/question.jsonl"), per_category=PER)
prompts = [turn_prompt_ids(tok, question.turns, []) for question in questions]  # first turns, as the bench builds them
kwargs = dict(max_new_tokens=128, do_sample=False, assistant_model=drafter,
              assistant_policy=hfas.StaticTreePolicy(2, 4, 8),
              prompt_lookup_num_tokens=4, cache_implementation="static",
              compile_config=hfas.fast_path_compile_config(model.device), return_dict_in_generate=True)
for ids in prompts:
    model.generate(ids, **kwargs)
seconds.clear()
calls.clear()
total, tokens, cycles = 0.0, 0, 0
for ids in prompts:
    start = time.perf_counter()
    out = model.generate(ids, **kwargs)
    total += time.perf_counter() - start
    tokens += out.sequences.shape[1] - ids.shape[1]
    cycles += out.speculation.cycles
print(f"{len(prompts)} turns, {tokens} tokens, {cycles} cycles, {tokens / total:.1f} tok/s, "
      f"{1e3 * total / cycles:.1f} ms per cycle of wall time (prefill included)")
for key, value in seconds.items():
    print(f"  {key:45s} {1e3 * value / cycles:6.2f} ms per cycle ({100 * value / total:4.1f}% of wall time), "
          f"{calls[key] / cycles:.2f} calls per cycle")
