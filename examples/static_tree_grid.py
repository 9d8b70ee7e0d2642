"""Find the fastest static tree for a drafter on this machine (a small interleaved grid).

    python examples/static_tree_grid.py --eagle3 PATH --questions 4 --max-new-tokens 96
    python examples/static_tree_grid.py --shapes 1,1,2 1,3,4 2,2,4 3,1,4   # depth,top_k,total_tokens each
    python examples/static_tree_grid.py --dtype bfloat16 --compile --lookup-tokens 4   # the compiled fast path

For each MT-bench question (first turn, chat template), every tree shape in the grid and
stock generate decode in turn (interleaved, greedy, identity checked); it prints tokens/s,
τ and the speedup (ratio of total throughputs) per shape, best first. With ``--compile`` both
stock and the trees run on the compiled static-cache path (stock: transformers' own, with the same
compile configuration and cache length); each shape's graphs compile during an untimed warm-up.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from importlib import resources

import torch
from transformers import StaticCache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.compiled import inductor_settings

CHAIN_DEPTHS = (3, 4, 5, 6)
TREES = {"depth": (3, 4, 5), "top_k": (2, 4), "total_tokens": (6, 8, 12)}


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"3,2,6"`` -> ``(3, 2, 6)``: depth, top_k, total_tokens (root included)."""
    try:
        depth, top_k, total_tokens = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected depth,top_k,total_tokens (e.g. 3,2,6), got {text!r}") from None
    return depth, top_k, total_tokens


def parse_args() -> argparse.Namespace:
    """The grid's arguments; a grid it would count wrongly is refused before the models load."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eagle3", default=None, help="drafter checkpoint (default: the shipped one)")
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--num-threads", type=int, default=None)
    parser.add_argument("--shapes", nargs="+", type=parse_shape, default=None,
                        help="trees to try, each depth,top_k,total_tokens (default: chains of 3-6 and a small grid)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--compile", action="store_true", help="the compiled static-cache path (stock too)")
    parser.add_argument("--lookup-tokens", type=int, default=0, help="the prompt-lookup branch on every tree")
    args = parser.parse_args()
    if args.questions < 1:
        parser.error(f"--questions {args.questions}: give at least 1")
    if args.shapes and len(set(args.shapes)) < len(args.shapes):  # one total counted twice: '8/4 identical'
        parser.error(f"--shapes names a tree twice: give each once, got {' '.join(map(str, args.shapes))}")
    return args


def print_table(totals: dict, shapes: list, questions: int) -> None:
    """The grid's Markdown table, fastest tree first, against stock (``totals[None]``)."""
    stock_rate = totals[None][0] / totals[None][1]
    rows = sorted(shapes, key=lambda s: -totals[s][0] / totals[s][1])
    print(f"stock: {stock_rate:.2f} tokens/s over {questions} questions\n")
    print("| depth | top_k | total_tokens | tokens/s | τ | speedup | identical |\n|---|---|---|---|---|---|---|")
    for shape in rows:
        tokens, seconds, cycles, identical, emitted = totals[shape]
        print(f"| {shape[0]} | {shape[1]} | {shape[2]} | {tokens / seconds:.2f} | {emitted / max(cycles, 1):.2f} | "
              f"{tokens / seconds / stock_rate:.2f}x | {identical}/{questions} |")


def main() -> None:
    args = parse_args()
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    model, tokenizer = hfas.load_default_model(dtype=getattr(torch, args.dtype))
    hfas.enable(model)
    lines = resources.files("hf_adaptive_spec.bench").joinpath("data/question.jsonl").read_text().splitlines()
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": json.loads(line)["turns"][0]}],
                                      add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
        for line in lines[: args.questions]
    ]
    fast = {}
    if args.compile:  # one cache for every call: the longest prompt, its answer and the largest bucket (a shorter
        # one failed in stock's IndexError, from transformers' index_copy_, after the first questions had run)
        slots = hfas.fast_path(model).needed_slots(max(ids.shape[1] for ids in prompts) + args.max_new_tokens)
        cache = StaticCache(config=model.config, max_cache_len=max(1024, slots))
        fast = {"past_key_values": cache, "compile_config": hfas.fast_path_compile_config(model.device)}
    drafter = hfas.Eagle3Drafter.from_pretrained(args.eagle3 or hfas.shipped_checkpoint("eagle3"), target=model)
    shapes = args.shapes or [(d, 1, d + 1) for d in CHAIN_DEPTHS] + list(itertools.product(*TREES.values()))
    # per shape: tokens, seconds, cycles, identical, emitted in cycles
    totals = {shape: [0, 0.0, 0, 0, 0] for shape in [None, *shapes]}
    for ids in prompts:
        reference = None
        for shape in [None, *shapes]:
            kwargs = {}
            if shape is not None:
                kwargs = {"assistant_model": drafter, "assistant_policy": hfas.StaticTreePolicy(*shape)}
            if shape is not None and args.lookup_tokens:
                kwargs["prompt_lookup_num_tokens"] = args.lookup_tokens
            kwargs.update(fast)
            if fast and ids is prompts[0]:  # compile this shape's graphs, untimed
                cache.reset()
                with inductor_settings(fast["compile_config"].to_dict()):
                    model.generate(ids, max_new_tokens=args.max_new_tokens, do_sample=False, **kwargs)
            if fast:
                cache.reset()
            start = time.perf_counter()
            with inductor_settings(fast["compile_config"].to_dict() if fast else None):  # weight freezing for stock too
                out = model.generate(ids, max_new_tokens=args.max_new_tokens, do_sample=False, **kwargs)
            seconds = time.perf_counter() - start
            reference = out if shape is None else reference
            entry = totals[shape]
            entry[0] += out.shape[1] - ids.shape[1]
            entry[1] += seconds
            entry[2] += model.last_speculation.cycles if shape else 0
            entry[3] += int(torch.equal(out, reference))
            if shape:
                stats = model.last_speculation
                entry[4] += sum(stats.accepted_lengths) + stats.cycles
    print_table(totals, shapes, len(prompts))


if __name__ == "__main__":
    main()
