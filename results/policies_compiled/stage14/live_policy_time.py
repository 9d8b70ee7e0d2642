"""RADAR's policy time per cycle inside a compiled bfloat16 generate, split by hook (4 prompts x 128 tokens,
the shipped drafter, the stage-14 RADAR, two rounds):

    python results/policies_compiled/stage14/live_policy_time.py artifacts/radar-smollm2-stage14

(log: live_policy_time.log, before and after the numpy one-step cell of 2026-11-27). Any policy folder works; a second
argument N decodes with the N-token prompt-lookup branch (`prompt_lookup_num_tokens=N`, for policies trained with it;
results/policies_compiled/avx512_bf16/live_policy_time.log, LTD's actors on the host, 2026-12-03)."""

from __future__ import annotations

import collections
import sys
import time

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.bench.fast_path import fast_path_compile_config, shared_static_cache
from hf_adaptive_spec.default_model import load_default_model

torch.set_num_threads(2)
model, tokenizer = load_default_model(torch.bfloat16)
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
policy = hfas.AutoDraftPolicy.from_pretrained(sys.argv[1])
lookup = {"prompt_lookup_num_tokens": int(sys.argv[2])} if len(sys.argv) > 2 else {}
spent = collections.defaultdict(float)


def wrap(name):
    original = getattr(policy, name)

    def timed(*args, **kwargs):
        tick = time.perf_counter()
        result = original(*args, **kwargs)
        spent[name] += time.perf_counter() - tick
        return result

    setattr(policy, name, timed)


for name in ("tree_config", "continue_drafting", "num_tokens_to_verify", "observe", "begin_generation"):
    wrap(name)
cache = shared_static_cache(model, 1024)
prompts = ["Explain how a bicycle works, step by step.", "Write a short poem about the sea.",
           "What are the main causes of inflation?", "Describe the water cycle to a child."]
for round_ in range(2):
    spent.clear(); total = 0.0; cycles = 0
    for text in prompts:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
        cache.reset()
        out = model.generate(ids, max_new_tokens=128, do_sample=False, assistant_model=drafter, assistant_policy=policy,
                             past_key_values=cache, compile_config=fast_path_compile_config(model.device), return_dict_in_generate=True,
                             **lookup)
        total += out.speculation.policy_time; cycles += out.speculation.cycles
    print(f"round {round_}: {cycles} cycles, engine policy time {1e3*total/cycles:.3f} ms/cycle; hooks: " + ", ".join(f"{k} {1e3*v/cycles:.3f}" for k, v in spent.items()))
