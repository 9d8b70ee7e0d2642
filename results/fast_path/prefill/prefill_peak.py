"""Sessions 70-71. Is the eager prefill a lever? Times SmolLM2's bfloat16 prefill as the engine runs it (eager, into
the static cache the engine sizes for a 128-token call, logits of the last position only) at Spec-Bench's prompt
lengths, against: the same forward into a dynamic cache (attention over the prompt's own tokens only, not the static
cache's empty slots); the floor its matrix products set on this CPU (each decoder layer's seven projections as bare
bfloat16 `F.linear` calls over the same tokens, 30 layers); and the static-cache forward compiled by inductor with
dynamic shapes (one graph for every length, no freezing). Medians of REPEATS runs; run alone:
`python results/fast_path/prefill/prefill_peak.py`."""
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from transformers import DynamicCache, StaticCache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.generation.static_path import FastPath

LENGTHS = [int(n) for n in (sys.argv[1] if len(sys.argv) > 1 else "64,128,256,512").split(",")]
REPEATS = 7
torch.set_num_threads(2)
model, _ = hfas.load_default_model(dtype=torch.bfloat16)
model.eval()
layers = model.model.layers
config = model.config


def median_seconds(run) -> float:
    run()  # warm-up
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def engine_slots(n: int) -> int:
    """The static cache the engine decodes a 128-token call of an n-token prompt in (default buckets)."""
    return FastPath.rounded_cache_length(FastPath(model).needed_slots(n + 128))


def prefill(forward, n: int, static: bool = True):
    slots = engine_slots(n)
    cache = StaticCache(config=config, max_cache_len=slots) if static else None
    ids = torch.randint(100, 40000, (1, n))

    def run():
        if static:
            cache.reset()
        with torch.no_grad():
            forward(input_ids=ids, position_ids=torch.arange(n)[None],
                    past_key_values=cache if static else DynamicCache(config=config), use_cache=True,
                    logits_to_keep=1)
    return run


def projections(n: int):
    weights = [m.weight for layer in layers for m in (layer.self_attn.q_proj, layer.self_attn.k_proj,
               layer.self_attn.v_proj, layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj,
               layer.mlp.down_proj)]
    inputs = {w.shape[1]: torch.randn(n, w.shape[1], dtype=torch.bfloat16) for w in weights}

    def run():
        with torch.no_grad():
            for w in weights:
                F.linear(inputs[w.shape[1]], w)
    return run


flops_per_token = 2 * sum(p.numel() for layer in layers for p in layer.parameters() if p.dim() == 2)
compiled = torch.compile(model.forward, dynamic=True)
print(f"{torch.__version__}; {flops_per_token / 1e6:.0f} MFLOP per token in the decoder's projections")
print("| prompt tokens | cache slots | eager prefill ms | dynamic cache ms | projections alone ms | eager / projections "
      "| GFLOP/s (projections) | compiled (dynamic) ms | compiled / eager |")
print("|---|---|---|---|---|---|---|---|---|")
start = time.perf_counter()
prefill(compiled, LENGTHS[0])()
print(f"(compiling took {time.perf_counter() - start:.0f} s)", flush=True)
for n in LENGTHS:
    slots = engine_slots(n)
    eager = median_seconds(prefill(model.forward, n))
    dynamic = median_seconds(prefill(model.forward, n, static=False))
    floor = median_seconds(projections(n))
    comp = median_seconds(prefill(compiled, n))
    print(f"| {n} | {slots} | {1000 * eager:.1f} | {1000 * dynamic:.1f} | {1000 * floor:.1f} | {eager / floor:.2f} "
          f"| {flops_per_token * n / floor / 1e9:.0f} | {1000 * comp:.1f} | {comp / eager:.2f} |", flush=True)
print(f"graphs compiled: {torch._dynamo.utils.counters['stats']['unique_graphs']}")
