"""``hf-adaptive-spec profile``: measure this machine's hardware cost profile."""

from __future__ import annotations

import argparse

import torch

from .. import CausalLMDrafter, Eagle3Drafter, StaticTreePolicy, enable, load_default_model
from .hardware import DEFAULT_VERIFY_TOKENS, HardwareProfile, measure_in_generate, measure_verification

PROMPT = "Explain how a bicycle works, step by step."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hf-adaptive-spec profile", description=__doc__)
    parser.add_argument("--json", required=True, help="where to write the profile")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--num-threads", type=int, default=None)
    parser.add_argument("--context-length", type=int, default=256)
    parser.add_argument("--verify-tokens", default=",".join(map(str, DEFAULT_VERIFY_TOKENS)))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--eagle3", default=None, help="EAGLE-3 drafter checkpoint to time (default: an early exit)")
    parser.add_argument("--drafter-layers", type=int, default=8, help="early-exit drafter layers, without --eagle3")
    args = parser.parse_args(argv)
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    model, tokenizer = load_default_model(dtype=getattr(torch, args.dtype))
    enable(model)
    tokens, seconds = measure_verification(
        model, args.context_length, tuple(int(n) for n in args.verify_tokens.split(",")), args.repeats
    )
    drafter = (
        Eagle3Drafter.from_pretrained(args.eagle3, target=model)
        if args.eagle3
        else CausalLMDrafter.from_target_layers(model, args.drafter_layers)
    )
    messages = [{"role": "user", "content": PROMPT}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    draft_step, policy_call = measure_in_generate(model, ids, drafter, StaticTreePolicy(depth=4, top_k=4, total_tokens=12))
    profile = HardwareProfile(
        device=str(model.device), dtype=args.dtype, num_threads=torch.get_num_threads(), context_length=args.context_length,
        verify_tokens=tokens, verify_seconds=seconds, draft_step_seconds=draft_step, policy_call_seconds=policy_call,
    )
    profile.save(args.json)
    base = seconds[0]
    for n, s in zip(tokens, seconds):
        print(f"verify {n:>3} tokens: {1000 * s:7.1f} ms  ({s / base:.2f}x one token)")
    print(f"draft step: {1000 * draft_step:.1f} ms   policy call: {1000 * policy_call:.3f} ms   -> {args.json}")
    return 0
