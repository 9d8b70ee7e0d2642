"""Per-graph compile seconds of the in-process compiled fast path, with variants (issue 28).

    TORCHINDUCTOR_CACHE_DIR=/tmp/fresh python results/fast_path/compile_time_variants.py [--target nofreeze --draft nofreeze]

Run twice per variant (cold, then warm). Verification compiles in-process here (package_dir=None),
as the engine did before ahead-of-time packages; log: compile_time_variants_epyc.log."""
import argparse, time, sys
import torch
import hf_adaptive_spec as hfas
from hf_adaptive_spec.core import compiled as C, static_steps as S

p = argparse.ArgumentParser()
p.add_argument("--buckets", default="8,12,16,32")
p.add_argument("--draft", default="same", choices=["same", "nofreeze", "noprepack", "eager"])
p.add_argument("--target", default="same", choices=["same", "noprepack", "nofreeze"])
a = p.parse_args()
log = []
orig_call = C.CompiledForward.__call__
def call(self, key, *args):
    r, s = orig_call(self, key, *args)
    if s: log.append((getattr(self, "_tag", "target"), key if not isinstance(key, tuple) else key[:2], round(s, 1))); print("  graph", log[-1], flush=True)
    return r, s
C.CompiledForward.__call__ = call
orig_init = S.StaticDraftSteps.__init__
def init(self, step, config, device, dtype, max_length, compile_options, tree_room=256):
    if compile_options is not None:
        opts = dict(compile_options); o = dict(opts.get("options") or {})
        if a.draft == "nofreeze": o.pop("freezing", None)
        if a.draft == "noprepack": o["cpp.weight_prepack"] = False
        opts["options"] = o
        compile_options = None if a.draft == "eager" else opts
    orig_init(self, step, config, device, dtype, max_length, compile_options, tree_room)
    if self.compiled is not None: self.compiled._tag = "draft"
S.StaticDraftSteps.__init__ = init
torch.set_num_threads(2)
model, tok = hfas.load_default_model(dtype=torch.bfloat16)
hfas.enable(model)
from hf_adaptive_spec.generation.static_path import fast_path
fast_path(model, buckets=tuple(int(b) for b in a.buckets.split(",")), package_dir=None)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
policy = hfas.StaticTreePolicy(2, 4, 8)
cc = hfas.fast_path_compile_config(model.device)
if a.target == "noprepack": cc.options = {"freezing": True, "cpp.weight_prepack": False}
if a.target == "nofreeze": cc.options = {}
PROMPTS = ["Hi!", "Explain photosynthesis to a child in three sentences.",
           "Summarize the plot of Romeo and Juliet, then list its five main characters with one line each.",
           "Write a short poem about the sea, then explain its meter."]
total = 0
for i, text in enumerate(PROMPTS):
    ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    t = time.perf_counter()
    out = model.generate(ids, max_new_tokens=64, do_sample=False, assistant_model=drafter, assistant_policy=policy,
                         prompt_lookup_num_tokens=4, cache_implementation="static", compile_config=cc, return_dict_in_generate=True)
    st = out.speculation; total += st.compile_time
    print(f"prompt {ids.shape[1]:3d}: call {time.perf_counter()-t:6.1f} s compiling {st.compile_time:6.1f} s; decode {out.sequences.shape[1]-ids.shape[1]} tok", flush=True)
print(f"VARIANT buckets={a.buckets} draft={a.draft} target={a.target}: compile total {total:.1f} s; graphs {log}")
