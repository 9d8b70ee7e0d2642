"""Ahead-of-time packages against in-process compiled graphs, same process, interleaved (issue 28).

    python results/fast_path/packages_experiment.py   # MT-bench questions 11-18, 128 tokens, bfloat16

The engine's verification forward as an AOTInductor package (FastPath's default on a CPU with weight
freezing) and as in-process torch.compile graphs (package_dir=None), each with the shipped EAGLE-3
drafter, the bench's default tree 2/4/8 and the prompt-lookup branch; stock compiled generate as the
reference. Compile, build and load times are excluded (every combination warms up on the first prompt).
"""
import json, statistics, time, torch
from importlib import resources
from transformers import StaticCache
import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.compiled import inductor_settings
from hf_adaptive_spec.generation.static_path import DEFAULT_BUCKETS, FastPath
torch.set_num_threads(2)
model, tok = hfas.load_default_model(dtype=torch.bfloat16)
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
cc = hfas.fast_path_compile_config("cpu")
cache = StaticCache(config=model.config, max_cache_len=1024)
paths = {"packaged": FastPath(model, DEFAULT_BUCKETS), "in-process": FastPath(model, DEFAULT_BUCKETS, package_dir=None)}
lines = resources.files("hf_adaptive_spec.bench").joinpath("data/question.jsonl").read_text().splitlines()
prompts = [json.loads(l)["turns"][0] for l in lines[10:18]]
rates, sequences, warm = {}, {}, {}
def run(ids, name):
    kw = dict(past_key_values=cache, compile_config=cc, max_new_tokens=128, do_sample=False)
    cache.reset()
    if name == "stock-compiled":
        with inductor_settings(cc.to_dict()):
            return model.generate(ids, **kw), 0.0
    model._hf_adaptive_spec_fast_path = paths[name]
    out = model.generate(ids, assistant_model=drafter, assistant_policy=hfas.StaticTreePolicy(2, 4, 8),
                         prompt_lookup_num_tokens=4, return_dict_in_generate=True, **kw)
    return out.sequences, out.speculation.compile_time
for i, text in enumerate(prompts):
    ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    for name in ("stock-compiled", *paths):
        if i == 0:
            t = time.perf_counter(); run(ids, name); warm[name] = time.perf_counter() - t
        t = time.perf_counter(); seq, compiling = run(ids, name); dt = time.perf_counter() - t - compiling
        rates.setdefault(name, []).append((seq.shape[1] - ids.shape[1]) / dt)
        sequences.setdefault(name, []).append(seq)
    print("prompt", i, {n: round(r[-1], 1) for n, r in rates.items()}, flush=True)
print("first call (compile/build/load + decode) s:", {n: round(s, 1) for n, s in warm.items()})
base = statistics.median(rates["stock-compiled"])
for name, r in rates.items():
    print(f"{name:15s} median {statistics.median(r):6.2f} tok/s  {statistics.median(r) / base:.2f}x stock-compiled")
same = sum(torch.equal(a, b) for a, b in zip(sequences["packaged"], sequences["in-process"]))
print(f"packaged vs in-process: identical answers {same}/{len(prompts)}")
