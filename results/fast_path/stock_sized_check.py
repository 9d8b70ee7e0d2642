"""Does transformers' compiled stock path (inductor freezing) decode across kept StaticCaches of two sizes?

Run from the repository root: `python results/fast_path/stock_sized_check.py` (log: stock_sized_check.log). Each line:
the call's seconds (the first in each size compiles) and whether its 32 tokens equal eager bfloat16 stock's (bfloat16
compiled and eager may differ by a token; the check is that nothing crashes and each size repeats itself)."""
import time
import torch
from hf_adaptive_spec.default_model import load_model
from hf_adaptive_spec.bench.fast_path import fast_path_compile_config, shared_static_cache
from hf_adaptive_spec.core.compiled import inductor_settings

torch.set_num_threads(2)
model, tok = load_model(None, torch.bfloat16)
cfg = fast_path_compile_config(model.device)
def ids(n):
    text = " ".join(["Explain how a bicycle works, step by step."] * n)
    return tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
short, long = ids(1), ids(50)
print("prompt lengths", short.shape[1], long.shape[1])
def run(prompt, slots, compiled=True):
    cache = shared_static_cache(model, slots); cache.reset()
    kw = dict(max_new_tokens=32, do_sample=False, past_key_values=cache)
    if compiled: kw["compile_config"] = cfg
    with inductor_settings(cfg.to_dict()):
        t = time.perf_counter(); out = model.generate(input_ids=prompt, **kw); dt = time.perf_counter() - t
    return out[0, prompt.shape[1]:].tolist(), dt
ref_short, _ = run(short, 512, compiled=False)
ref_long, _ = run(long, 1024, compiled=False)
for prompt, slots, ref, label in [(short, 512, ref_short, "short/512"), (long, 1024, ref_long, "long/1024"),
                                  (short, 512, ref_short, "short/512 again"), (short, 1024, ref_short, "short/1024"),
                                  (long, 1024, ref_long, "long/1024 again"), (short, 512, ref_short, "short/512 third")]:
    tokens, dt = run(prompt, slots)
    print(label, "seconds", round(dt, 2), "same as eager bf16:", tokens == ref, sum(a == b for a, b in zip(tokens, ref)))
