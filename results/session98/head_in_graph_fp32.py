"""Session 98: what the lm_head costs inside the compiled float32 verification forward on this CPU. The static
path's graph returns every row's logits; the eager path runs the head only on the rows the acceptance walk visits.
Times the engine's compiled verification of n tokens (in-process, inductor with weight freezing, 256-token context
in 512 slots, median of 15) as shipped, then with the graph stopping at the final norm (this process only), and
the head outside a graph on 1-16 rows.

    python results/session98/head_in_graph_fp32.py
"""

import time

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.output_head import OutputHead
from hf_adaptive_spec.generation import static_path
from hf_adaptive_spec.profiling.measure import measure_static_verification

torch.set_num_threads(2)
SIZES = (1, 4, 8, 12, 16)
model, _ = hfas.load_default_model(dtype=torch.float32)
model.eval()
options = hfas.fast_path_compile_config(model.device).to_dict()


def without_head(model, input_ids, position_ids, attention_mask, cache, feature_layers):
    out = model.model(input_ids=input_ids, position_ids=position_ids,
                      attention_mask=static_path.attention_mask_argument(model.config, attention_mask),
                      past_key_values=cache, use_cache=True,
                      output_hidden_states=list(feature_layers) if feature_layers else False)
    return out.last_hidden_state, tuple(out.hidden_states[i] for i in feature_layers)


rows = {}
for label in ("with the head (shipped)", "final norm only"):
    if label == "final norm only":
        static_path._forward_with_features = without_head
    sizes, seconds, _ = measure_static_verification(model, tokens=SIZES, repeats=15, compile_options=options,
                                                     cache_slots=512)
    rows[label] = seconds
    print(f"{label:26s} " + "  ".join(f"{n}: {1e3 * s:5.1f} ms" for n, s in zip(sizes, seconds)), flush=True)
print(f"{'the head in the graph':26s} " + "  ".join(
    f"{n}: {1e3 * (a - b):5.1f} ms" for n, a, b in zip(SIZES, *rows.values())))
head = OutputHead(model.get_output_embeddings())
with torch.no_grad():
    for n in SIZES:
        hidden = torch.randn(n, model.config.hidden_size)
        runs = []
        for _ in range(33):
            start = time.perf_counter()
            head(hidden)
            runs.append(time.perf_counter() - start)
        print(f"head outside a graph, {n:2d} rows at once: {1e3 * sorted(runs[3:])[15]:.2f} ms")
