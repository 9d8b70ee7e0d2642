"""How long the compiled fast path takes to compile on its first call, in this process.

    python examples/compile_time.py --dtype bfloat16   # cold: clear inductor's cache and the package folder first
    python examples/compile_time.py --dtype bfloat16   # again, in a new process: packages and caches are warm

Runs the shipped EAGLE-3 drafter with a static tree and the prompt-lookup branch on the compiled
static-cache path (``cache_implementation="static"`` and ``hfas.fast_path_compile_config``) for a
few prompts of different lengths, and prints what ``out.speculation.compile_time`` reports per call:
the first call compiles every graph it needs, later prompt lengths compile nothing more.
On a CPU the target's verification forward is an ahead-of-time package per bucket, built once and
loaded by later processes (``$HF_ADAPTIVE_SPEC_PACKAGES``, default ``~/.cache/hf_adaptive_spec/packages``);
``--no-packages`` compiles it in-process instead. Inductor keeps its cache (the drafter's graphs) in
``$TORCHINDUCTOR_CACHE_DIR`` (default ``/tmp/torchinductor_$USER``).
"""

from __future__ import annotations

import argparse
import time

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.generation.static_path import fast_path

PROMPTS = ["Hi!", "Explain photosynthesis to a child in three sentences.",
           "Summarize the plot of Romeo and Juliet, then list its five main characters with one line each.",
           "Write a short poem about the sea, then explain its meter."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--tree", nargs=3, type=int, default=(2, 4, 8), metavar=("DEPTH", "TOP_K", "TOTAL_TOKENS"))
    parser.add_argument("--lookup-tokens", type=int, default=4)
    parser.add_argument("--no-packages", action="store_true", help="compile the verification forward in-process")
    args = parser.parse_args()
    model, tokenizer = hfas.load_default_model(dtype=getattr(torch, args.dtype))
    hfas.enable(model)
    path = fast_path(model, package_dir=None) if args.no_packages else fast_path(model)
    total = 0.0
    drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
    policy = hfas.StaticTreePolicy(*args.tree)
    compile_config = hfas.fast_path_compile_config(model.device)
    for text in PROMPTS:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                            return_tensors="pt", return_dict=True)["input_ids"]
        start = time.perf_counter()
        out = model.generate(ids, max_new_tokens=64, do_sample=False, assistant_model=drafter, assistant_policy=policy,
                             prompt_lookup_num_tokens=args.lookup_tokens, cache_implementation="static",
                             compile_config=compile_config, return_dict_in_generate=True)
        stats = out.speculation
        total += stats.compile_time
        print(f"prompt of {ids.shape[1]:3d} tokens: call {time.perf_counter() - start:6.1f} s, of which compiling "
              f"{stats.compile_time:6.1f} s (compiled={stats.compiled}, packaged={stats.packaged}, "
              f"cache={stats.cache})", flush=True)
    packages = path.packaged_forward
    built = f"; packages built {packages.built}, loaded from disk {packages.loaded}" if packages is not None else ""
    print(f"compiling in all: {total:.1f} s{built}")


if __name__ == "__main__":
    main()
