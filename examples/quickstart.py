"""Quickstart: stock generate vs tree speculation on the embedded SmolLM2-135M-Instruct.

Run: bash scripts/setup.sh && .venv/bin/python examples/quickstart.py

For each chat prompt it generates greedily with stock ``generate`` and with speculation
(same call plus ``assistant_model=`` and ``assistant_policy=``), checks the tokens are
identical, and prints τ (tokens per target forward) and the speedup.

Drafter: the EAGLE-3 drafter shipped for SmolLM2 (``hfas.shipped_checkpoint("eagle3")``),
with three policies: a static tree and the learned RADAR and LTD policies shipped for this
drafter, which decide per cycle whether to speculate at all (both may skip verification), and
LTD again with the prompt-lookup branch (``prompt_lookup_num_tokens=4``: the tokens that followed
the context's last bigram earlier on join every tree), which pays off where the answer copies.
The fastest static tree depends on the CPU (results/tree_grid_fp32_epyc.md): depth 1 with the
5 best first drafts verified (the default, ``--tree 1 8 6``) on the AMD EPYC the shipped policies
were trained for, where any forward over 2 or more tokens costs about 1.5x a one-token forward;
a chain of 1 (``--tree 1 1 2``) on an Intel Xeon. Find yours with ``hf-adaptive-spec profile``
and ``examples/static_tree_grid.py``.
"""

from __future__ import annotations

import argparse
import time

import torch

import hf_adaptive_spec as hfas

EPYC_TREE = (1, 8, 6)  # (depth, top_k, total_tokens): fastest on the AMD EPYC with the stage-3 drafter (results/README.md)

PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Give three tips for staying focused while studying.",
    "Fix the grammar: 'me and him goes to the market every mornings, and we buys apples and bread there.'",
]


def _timed_generate(model, input_ids, **kwargs):
    start = time.perf_counter()
    out = model.generate(input_ids, do_sample=False, return_dict_in_generate=True, **kwargs)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--eagle3", default=None, help="EAGLE-3 checkpoint (default: the shipped one)")
    parser.add_argument("--tree", nargs=3, type=int, default=EPYC_TREE, metavar=("DEPTH", "TOP_K", "TOTAL_TOKENS"),
                        help="the static tree (default: 1 8 6)")
    args = parser.parse_args()

    model, tokenizer = hfas.load_default_model(dtype=torch.float32)
    hfas.enable(model)
    checkpoint = args.eagle3 or hfas.shipped_checkpoint("eagle3")
    drafter = hfas.Eagle3Drafter.from_pretrained(checkpoint, target=model)
    ltd = hfas.AutoDraftPolicy.from_pretrained(str(hfas.shipped_checkpoint("ltd")))
    runs = {  # name: (policy, extra generate kwargs)
        "static": (hfas.StaticTreePolicy(depth=args.tree[0], top_k=args.tree[1], total_tokens=args.tree[2]), {}),
        "radar": (hfas.AutoDraftPolicy.from_pretrained(str(hfas.shipped_checkpoint("radar"))), {}),
        "ltd": (ltd, {}),
        "ltd+lookup": (ltd, {"prompt_lookup_num_tokens": 4}),
    }
    print(f"drafter: EAGLE-3 ({checkpoint}); runs: {list(runs)}\n")

    stock_time, spec_time = 0.0, dict.fromkeys(runs, 0.0)
    for text in PROMPTS:
        messages = [{"role": "user", "content": text}]
        input_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
        stock, t_stock = _timed_generate(model, input_ids, max_new_tokens=args.max_new_tokens)
        stock_time += t_stock
        print(f"> {text}\n{tokenizer.decode(stock.sequences[0, input_ids.shape[1] :], skip_special_tokens=True).strip()}")
        for name, (policy, extra) in runs.items():
            spec, t_spec = _timed_generate(
                model, input_ids, max_new_tokens=args.max_new_tokens, assistant_model=drafter, assistant_policy=policy,
                **extra,
            )
            spec_time[name] += t_spec
            print(
                f"  {name:>10}: identical={torch.equal(stock.sequences, spec.sequences)}  "
                f"tau={spec.speculation.mean_accepted_tokens:.2f}  stock={t_stock:.2f}s  speculative={t_spec:.2f}s  "
                f"speedup={t_stock / t_spec:.2f}x"
            )
        print()
    for name, seconds in spec_time.items():
        print(f"overall speedup, {name}: {stock_time / seconds:.2f}x (wall time, greedy, fp32)")


if __name__ == "__main__":
    main()
