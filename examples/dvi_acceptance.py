"""DVI's held-out τ and modelled speedup per exit layer and chain depth, for choosing the exit
layer by measurement (train a head per layer) or for comparing trained adapters.

    python examples/dvi_acceptance.py --completions artifacts/dvi_stream_regenerated.jsonl \
        --held-out artifacts/eagle3_heldout_regenerated.jsonl --exit-layers 2 4 6 8 --depths 1 2 3 4 \
        --json results/dvi_exit_layer_sweep.json
    python examples/dvi_acceptance.py --held-out artifacts/eagle3_heldout_regenerated.jsonl \
        --adapters artifacts/dvi-smollm2 artifacts/dvi-smollm2-kl-only --depths 1 2 3 4

With ``--exit-layers``, for each exit layer k it trains a fresh LoRA head with ``DVITrainer`` (replay rollout, chains of
``--train-depth``, one update per prompt, the default KL→RL schedule) on the first
``--train-prompts`` target-answered conversations, freezes it; with ``--adapters`` it loads each saved adapter
(frozen). Then it

* replays greedy chains of each depth d over the held-out answers: τ(k, d), tokens per target
  forward (exact for greedy decoding when the answers are the target's greedy output);
* times live ``generate`` cycles (shared shallow cache) on ``--timing-prompts`` held-out prompts,
  and stock greedy ``generate`` on the same prompts: seconds per cycle and per stock token.

The modelled speedup over stock is ``τ(k, d) · t_stock_token / t_cycle(k, d)``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.dvi import DVIDrafter
from hf_adaptive_spec.training.dvi import DVIConfig, DVITrainer
from hf_adaptive_spec.training.dvi.data import load_completions
from hf_adaptive_spec.training.dvi.replay import GreedyChainReplay


def train_head(model, exit_layer: int, records, args) -> DVIDrafter:
    with tempfile.TemporaryDirectory() as output_dir:
        config = DVIConfig(
            output_dir=output_dir, exit_layer=exit_layer, draft_depth=args.train_depth, rollout="replay",
            max_new_tokens=args.max_new_tokens, max_steps=len(records), save_strategy="no", report_to=[],
            logging_steps=50, disable_tqdm=True, seed=0,
        )
        trainer = DVITrainer(target_model=model, args=config, train_dataset=records)
        trainer.train()
    trainer.drafter.freeze()
    return trainer.drafter


def held_out_tau(model, drafter, records, depth: int, max_new_tokens: int, eos: list[int]) -> tuple[float, float]:
    """(τ, first-draft acceptance) of greedy chains of ``depth`` replayed over ``records``."""
    replay = GreedyChainReplay(model, drafter, depth, max_new_tokens, eos)
    accepted, cycles, first = 0, 0, 0
    for record in records:
        stats = replay.run(record["input_ids"], record["completion_ids"])
        accepted += sum(stats.accepted_lengths)
        cycles += stats.cycles
        first += sum(1 for length in stats.accepted_lengths if length > 0)
    return 1.0 + accepted / cycles, first / cycles


def seconds_per_cycle(model, drafter, prompts, depth: int, max_new_tokens: int) -> float:
    policy = hfas.StaticTreePolicy.chain(depth)
    total, cycles = 0.0, 0
    for ids in prompts:
        prompt = torch.tensor([ids])
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=max_new_tokens, do_sample=False,
                       assistant_model=drafter, assistant_policy=policy)
        total += model.last_speculation.total_time
        cycles += model.last_speculation.cycles
    return total / cycles


def seconds_per_stock_token(model, prompts, max_new_tokens: int) -> float:
    total, tokens = 0.0, 0
    for ids in prompts:
        prompt = torch.tensor([ids])
        start = time.perf_counter()
        out = model.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=max_new_tokens, do_sample=False
        )
        total += time.perf_counter() - start
        tokens += out.shape[1] - prompt.shape[1]
    return total / tokens


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, refused where its sources contradict (before the target loads)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--completions", help="JSONL of target-answered conversations (training, with --exit-layers)")
    parser.add_argument("--held-out", required=True, help="JSONL of target-answered conversations never trained on")
    parser.add_argument("--train-prompts", type=int, default=300)
    parser.add_argument("--held-out-prompts", type=int, default=60)
    parser.add_argument("--timing-prompts", type=int, default=3)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--exit-layers", type=int, nargs="+", help="train a fresh head at each of these exit layers")
    source.add_argument("--adapters", nargs="+", help="evaluate these saved DVI adapters instead")
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--train-depth", type=int, default=4, help="chain depth while training (the paper's 4)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--timing-new-tokens", type=int, default=64)
    parser.add_argument("--max-prompt-tokens", type=int, default=512)
    parser.add_argument("--num-threads", type=int, default=2)
    parser.add_argument("--json", help="write the table here")
    args = parser.parse_args(argv)
    if bool(args.exit_layers) != bool(args.completions):  # before the target loads
        parser.error("--exit-layers trains a head per layer on --completions, and --adapters loads trained ones: give "
                     "--completions JSONL with --exit-layers, and not with --adapters")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.num_threads)
    model, tokenizer = hfas.load_default_model()
    hfas.enable(model)
    train = (
        load_completions(tokenizer, args.completions, args.train_prompts, args.max_prompt_tokens)
        if args.exit_layers
        else []
    )
    held_out = load_completions(tokenizer, args.held_out, args.held_out_prompts, args.max_prompt_tokens)
    timing_prompts = [record["input_ids"] for record in held_out[: args.timing_prompts]]
    eos = [tokenizer.eos_token_id]
    stock_token = seconds_per_stock_token(model, timing_prompts, args.timing_new_tokens)
    rows = []
    print(f"stock: {1000 * stock_token:.1f} ms/token")
    print("| drafter | exit layer | depth | held-out τ | first-draft acceptance | ms/cycle | modelled speedup |")
    print("|---|---|---|---|---|---|---|")
    for name in args.exit_layers or args.adapters:
        started = time.perf_counter()
        if args.exit_layers:
            drafter = train_head(model, name, train, args)
        else:
            drafter = DVIDrafter.from_pretrained(name, target=model)
        train_seconds = time.perf_counter() - started
        if args.exit_layers:
            label, exit_layer = f"trained on {len(train)} prompts", name
        else:
            label, exit_layer = name, drafter.exit_layer
        for depth in args.depths:
            tau, first = held_out_tau(model, drafter, held_out, depth, args.max_new_tokens, eos)
            cycle = seconds_per_cycle(model, drafter, timing_prompts, depth, args.timing_new_tokens)
            speedup = tau * stock_token / cycle
            rows.append({
                "drafter": label, "exit_layer": exit_layer, "depth": depth, "tau": tau, "first_draft_acceptance": first,
                "seconds_per_cycle": cycle, "modelled_speedup": speedup,
                "train_seconds": train_seconds if args.exit_layers else None,
            })
            print(f"| {label} | {exit_layer} | {depth} | {tau:.3f} | {first:.3f} | {1000 * cycle:.1f} "
                  f"| {speedup:.2f}x |", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"args": vars(args), "seconds_per_stock_token": stock_token, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
