"""Quickstart: tree speculation on transformers' fast path, on the embedded SmolLM2-135M-Instruct.

Run: bash scripts/setup.sh && .venv/bin/python examples/quickstart.py

The fastest configuration measured on these 2-core CPUs: bfloat16 weights, a fixed StaticCache
and a compiled forward (``cache_implementation="static"`` plus ``compile_config``), the shipped
EAGLE-3 drafter with a small static tree drafted only where the prompt-lookup branch found no match
(``LookupFirstPolicy``), verified in the buckets 2, 5, 8, 12, 16 and 32 (README.md). For each chat prompt it
runs, greedily:

- ``stock``: plain ``generate`` in float32, eager: the reference answer;
- ``stock-compiled``: transformers' own fast path (the same compile configuration, a fixed
  StaticCache), in ``--dtype``;
- ``speculative``: the same call plus ``assistant_model=``, ``assistant_policy=`` and
  ``prompt_lookup_num_tokens=4``, in ``--dtype``.

It prints each answer, τ (tokens per target forward), the speedups against both stocks, and how
much of the float32 answer each bfloat16 run reproduces before its first divergence (bfloat16
rounds multi-token verification differently from one-token decoding, and eager stock differently
from compiled stock; in float32 every run is token-identical). The first call compiles the
graphs (about a minute or two here; seconds once inductor's on-disk cache is warm), untimed.
``--dtype float32`` runs the same comparison in float32, where identity is checked. ``--device cuda``
runs it on a GPU (CUDA graphs instead of weight freezing), ``--eager`` without the static cache and
compilation (transformers' dynamic cache), and ``--checkpoint`` takes another EAGLE-3 drafter folder.
``--profile PATH`` takes the tree, the prompt-lookup branch and the verification buckets from this machine's
hardware profile (``hf-adaptive-spec profile --recording REC``): ``hfas.recommended_generate_kwargs`` and
``hfas.recommended_buckets``, as a script should. Without it (and without ``--tree``) the profile ``profile`` writes
by default (``hfas.profiling.default_profile_path()``) is used when there is one; with none, on a CPU without bfloat16
matrix instructions (AVX2, AVX512), the script says that its default tree is measured slower than stock there in
bfloat16, and that ``--dtype float32`` is not (results/README.md, "Float32 on this CPU" and "An AVX-512 Xeon without
bfloat16 matrix instructions").
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import StaticCache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core import common_prefix_length
from hf_adaptive_spec.core.compiled import inductor_settings
from hf_adaptive_spec.core.cost_curve import FLOAT32_ENGINE_MEASURED, converts_bfloat16, cpu_instruction_set
from hf_adaptive_spec.core.timing import timed
from hf_adaptive_spec.profiling import default_profile_path

TREE = (2, 4, 8)  # (depth, top_k, total_tokens): the compiled bfloat16 grid's best on an AMD EPYC (results/README.md)
BUCKETS = (2, 5, 8, 12, 16, 32)  # verification sizes: 5 is the root and a 4-token lookup match (README.md)

PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Give three tips for staying focused while studying.",
    "Fix the grammar: 'me and him goes to the market every mornings, and we buys apples and bread there.'",
]


def _timed(model, input_ids, **kwargs) -> tuple[list[int], float, object]:
    def generate():
        return model.generate(input_ids, do_sample=False, return_dict_in_generate=True, **kwargs)

    out, seconds = timed(input_ids.device, generate)  # CUDA runs asynchronously: waited for
    stats = getattr(out, "speculation", None)
    return out.sequences[0, input_ids.shape[1] :].tolist(), seconds - (stats.compile_time if stats else 0.0), stats


def _say_when_the_default_tree_is_slow(model, dtype: str) -> None:
    """On a CPU that converts bfloat16 to multiply it, a tree's verification costs several one-token forwards (8
    tokens: 3.85x one on an AVX2-only EPYC, 2.25x on an AVX-512 Xeon): the default tree, chosen where it costs about
    one, ran slower than compiled stock on the EPYC (results/README.md)."""
    instruction_set = cpu_instruction_set() if model.device.type == "cpu" else None
    if converts_bfloat16(dtype, instruction_set):
        print(f"note: this CPU ({instruction_set}) has no bfloat16 matrix instructions, where the default tree "
              f"{TREE} was measured slower than stock (AVX2). Profile it (`hf-adaptive-spec record` then "
              "`hf-adaptive-spec profile --dtype bfloat16 --compile --recording REC --buckets 2,3,4,8 --lookup-tokens "
              "0,1,2,4`, README) and run "
              f"again: the profile is then used. Or run --dtype float32: {FLOAT32_ENGINE_MEASURED} (level with the "
              "bfloat16 recommendation on the EPYC, 1.49x it on the Xeon).\n")


def _default_profile_for(model, drafter) -> str | None:
    """The profile `hf-adaptive-spec profile` writes by default, when there is one that fits this model (device,
    dtype, processor, drafter); one that does not is named and left aside (an explicit --profile is refused then)."""
    path = default_profile_path()
    if not path.is_file():
        return None
    try:
        hfas.recommended_generate_kwargs(str(path), model=model, drafter=drafter)
    except ValueError as error:
        print(f"note: not using the default profile: {error}\n")
        return None
    return str(path)


def _speculation(args, model, drafter) -> dict:
    """The speculative call's arguments and the verification buckets: this machine's profile's recommendation, for the
    target and drafter it timed, else --tree with the 4-token prompt-lookup branch in the buckets of ``BUCKETS``."""
    profile = None if args.no_profile or args.tree else args.profile or _default_profile_for(model, drafter)
    if not profile:
        hfas.fast_path(model, buckets=BUCKETS)
        _say_when_the_default_tree_is_slow(model, args.dtype)
        return {"assistant_policy": hfas.LookupFirstPolicy(*(args.tree or TREE)), "prompt_lookup_num_tokens": 4}
    hfas.fast_path(model, buckets=hfas.recommended_buckets(profile, model=model, drafter=drafter))
    speculation = hfas.recommended_generate_kwargs(profile, model=model, drafter=drafter)
    print(f"from {profile}: {speculation}")
    return speculation


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The demo's arguments; a profile together with --no-profile or --tree, whose tree it would silently replace, is
    refused here, before any model loads."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--tree", nargs=3, type=int, default=None, metavar=("DEPTH", "TOP_K", "TOTAL_TOKENS"),
                        help=f"the static tree drafted where the lookup branch found no match (default: {TREE}); "
                        "given, no profile is used")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--eager", action="store_true", help="dynamic cache, no compilation, for stock and speculation")
    parser.add_argument("--checkpoint", default=None, help="EAGLE-3 drafter folder; default: the shipped one")
    parser.add_argument("--profile", default=None, help="hardware profile JSON whose recommendation to decode with "
                        "(tree, lookup branch and buckets; not with --tree or --no-profile); default: the one "
                        "`hf-adaptive-spec profile` writes by default, when there is one measured on this device and "
                        "dtype")
    parser.add_argument("--no-profile", action="store_true", help="decode with --tree, whatever profile there is")
    args = parser.parse_args(argv)
    if args.profile and (args.no_profile or args.tree):
        parser.error("--profile sets the tree from its recommendation: give --profile, or --tree / --no-profile "
                     "without it, not both")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    reference, tokenizer = hfas.load_default_model(dtype=torch.float32)
    reference.to(args.device)
    model = hfas.enable(hfas.load_default_model(dtype=getattr(torch, args.dtype))[0].to(args.device))
    drafter = hfas.Eagle3Drafter.from_pretrained(args.checkpoint or hfas.shipped_checkpoint("eagle3"), target=model)
    speculation = _speculation(args, model, drafter)
    compile_config = hfas.fast_path_compile_config(model.device)
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                             return_tensors="pt", return_dict=True)["input_ids"].to(args.device)
               for text in PROMPTS]
    # one fixed cache (one set of graphs), holding the longest prompt and its answer (a shorter one failed in
    # transformers' index_copy_, IndexError, after the warm-up)
    longest = max(ids.shape[1] for ids in prompts) + args.max_new_tokens
    cache = StaticCache(config=model.config, max_cache_len=max(512, longest))
    fast_path = {} if args.eager else {"cache_implementation": "static", "compile_config": compile_config}

    def stock_compiled(ids):
        if args.eager:
            return _timed(model, ids, max_new_tokens=args.max_new_tokens)
        cache.reset()
        with inductor_settings(compile_config.to_dict()):  # weight freezing, as the engine applies it
            return _timed(model, ids, max_new_tokens=args.max_new_tokens, past_key_values=cache,
                          compile_config=compile_config)

    def speculative(ids):
        return _timed(
            model, ids, max_new_tokens=args.max_new_tokens, assistant_model=drafter, **speculation, **fast_path
        )

    peer = "stock-eager" if args.eager else "stock-compiled"  # in --dtype, the cache and compilation of speculative
    totals = {"stock": 0.0, peer: 0.0, "speculative": 0.0}
    for index, (text, ids) in enumerate(zip(PROMPTS, prompts)):
        if index == 0:  # warm-up, untimed
            start = time.perf_counter()
            stock_compiled(ids)
            speculative(ids)
            compiling = "" if args.eager else " (compiling the fast path)"
            print(f"warmed up{compiling} in {time.perf_counter() - start:.0f} s\n")
        ref_tokens, ref_seconds, _ = _timed(reference, ids, max_new_tokens=args.max_new_tokens)
        runs = {peer: stock_compiled(ids), "speculative": speculative(ids)}
        totals["stock"] += ref_seconds
        print(f"> {text}\n{tokenizer.decode(ref_tokens, skip_special_tokens=True).strip()}")
        for name, (tokens, seconds, stats) in runs.items():
            totals[name] += seconds
            agreement = common_prefix_length(tokens, ref_tokens) / max(len(ref_tokens), 1)
            tau = f"  tau={stats.mean_accepted_tokens:.2f}" if stats else ""
            print(f"  {name:>14}: {seconds:5.2f} s ({ref_seconds / seconds:.2f}x stock fp32){tau}  "
                  f"agrees with fp32 for {100 * agreement:.0f}% of it")
        print()
    print(f"overall: speculative {totals[peer] / totals['speculative']:.2f}x {peer} ({args.dtype}), "
          f"{totals['stock'] / totals['speculative']:.2f}x eager float32 stock (wall time, greedy)")


if __name__ == "__main__":
    main()
