import json, time, torch
from importlib import resources
from transformers import StaticCache
import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.compiled import inductor_settings
from hf_adaptive_spec.generation.static_path import FastPath
torch.set_num_threads(2)
model, tok = hfas.load_default_model(dtype=torch.bfloat16)
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
cc = hfas.fast_path_compile_config("cpu")
cache = StaticCache(config=model.config, max_cache_len=1024)
paths = {"A(8,16,32)": FastPath(model, (8, 16, 32)), "B(8,12,16,32)": FastPath(model, (8, 12, 16, 32)), "D(12,16,32)": FastPath(model, (12, 16, 32))}
lines = resources.files("hf_adaptive_spec.bench").joinpath("data/question.jsonl").read_text().splitlines()
prompts = [json.loads(l)["turns"][0] for l in lines[10:18]]
shapes = [(2, 4, 8), (3, 4, 8), (1, 8, 6)]
tot = {}
def run(ids, name, shape):
    kw = dict(past_key_values=cache, compile_config=cc, max_new_tokens=128, do_sample=False)
    cache.reset()
    if name == "stock":
        with inductor_settings(cc.to_dict()):
            return model.generate(ids, **kw), None
    model._hf_adaptive_spec_fast_path = paths[name]
    out = model.generate(ids, assistant_model=drafter, assistant_policy=hfas.StaticTreePolicy(*shape), prompt_lookup_num_tokens=4, return_dict_in_generate=True, **kw)
    return out.sequences, out.speculation
combos = [("stock", None)] + [(n, s) for n in paths for s in shapes]
for i, text in enumerate(prompts):
    ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    for name, shape in combos:
        if i == 0:
            run(ids, name, shape)
        t = time.perf_counter(); seq, st = run(ids, name, shape); dt = time.perf_counter() - t
        e = tot.setdefault((name, shape), [0, 0.0, 0])
        e[0] += seq.shape[1] - ids.shape[1]; e[1] += dt - (st.compile_time if st else 0); e[2] += st.cycles if st else 0
    print("done", i, flush=True)
base = tot[("stock", None)][0] / tot[("stock", None)][1]
for k, (n, s, c) in sorted(tot.items(), key=lambda kv: -kv[1][0] / kv[1][1]):
    print(k, f"{n / s:.2f} tok/s  {n / s / base:.2f}x  tau {n / max(c, 1):.2f}")
