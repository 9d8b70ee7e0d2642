"""``hf-adaptive-spec profile``: measure this machine's hardware cost profile."""

from __future__ import annotations

import argparse

import torch

from ..checkpoints import shipped_checkpoint
from ..core.cost_curve import CostCurve
from ..default_model import load_model
from ..drafters import CausalLMDrafter, Eagle3Drafter
from ..generation import enable, fast_path_compile_config
from ..generation.static_path import DEFAULT_BUCKETS
from ..policies import AutoDraftPolicy, StaticTreePolicy
from .hardware import (
    DEFAULT_VERIFY_TOKENS,
    HardwareProfile,
    measure_in_generate,
    measure_static_verification,
    measure_verification,
)

PROMPT = "Explain how a bicycle works, step by step."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hf-adaptive-spec profile", description=__doc__)
    parser.add_argument("--json", required=True, help="where to write the profile")
    parser.add_argument("--model", default=None, help="model folder or Hub id (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--num-threads", type=int, default=None)
    parser.add_argument("--context-length", type=int, default=256)
    parser.add_argument("--verify-tokens", default=",".join(map(str, DEFAULT_VERIFY_TOKENS)))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--eagle3", default=None, help="EAGLE-3 drafter checkpoint to time (default: an early exit)")
    parser.add_argument("--drafter-layers", type=int, default=8, help="early-exit drafter layers, without --eagle3")
    parser.add_argument("--static", action="store_true", help="the static-cache path (cache_implementation='static')")
    parser.add_argument("--compile", action="store_true", help="the compiled static-cache path (implies --static)")
    args = parser.parse_args(argv)
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    model, tokenizer = load_model(args.model, getattr(torch, args.dtype))
    enable(model)
    sizes = tuple(int(n) for n in args.verify_tokens.split(","))
    path, generate_kwargs, compile_seconds, buckets = "eager", {}, 0.0, None
    if args.static or args.compile:
        compile_config = fast_path_compile_config(model.device) if args.compile else None
        options = compile_config.to_dict() if compile_config is not None else None
        buckets = list(DEFAULT_BUCKETS)  # what the engine pads trees to: each is measured
        sizes = tuple(sorted(set(sizes) | set(buckets)))
        tokens, seconds, compile_seconds = measure_static_verification(model, args.context_length, sizes, args.repeats, options)
        path = "compiled" if args.compile else "static"
        generate_kwargs = {"cache_implementation": "static", **({"compile_config": compile_config} if args.compile else {})}
    else:
        tokens, seconds = measure_verification(model, args.context_length, sizes, args.repeats)
    drafter = (
        Eagle3Drafter.from_pretrained(args.eagle3, target=model)
        if args.eagle3
        else CausalLMDrafter.from_target_layers(model, args.drafter_layers)
    )
    messages = [{"role": "user", "content": PROMPT}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    policy = StaticTreePolicy(depth=4, top_k=4, total_tokens=12)
    measure_in_generate(model, ids, drafter, policy, max_new_tokens=8, **generate_kwargs)  # warm-up (compiles)
    draft_step, policy_call = measure_in_generate(model, ids, drafter, policy, **generate_kwargs)
    profile = HardwareProfile(
        device=str(model.device), dtype=args.dtype, num_threads=torch.get_num_threads(), context_length=args.context_length,
        verify_tokens=tokens, verify_seconds=seconds, draft_step_seconds=draft_step, policy_call_seconds=policy_call,
        path=path, buckets=buckets,
    )
    profile.save(args.json)
    base = seconds[0]
    for n, s in zip(tokens, seconds):
        print(f"verify {n:>3} tokens: {1000 * s:7.1f} ms  ({s / base:.2f}x one token)")
    if buckets:
        print(f"buckets: {buckets} (a tree is padded to the smallest that fits it and costs that size's time)")
    print(f"draft step: {1000 * draft_step:.1f} ms   policy call: {1000 * policy_call:.3f} ms   -> {args.json}")
    if args.compile:
        print(f"path: compiled ({compile_seconds:.0f} s compiling {len(tokens)} verification graphs)")
    for line in shipped_policy_fit(profile.cost_curve()):
        print(line)
    return 0


def shipped_policy_fit(curve: CostCurve) -> list[str]:
    """For each shipped learned policy, whether it was trained on this cost curve."""
    lines = []
    for name in ("ltd", "resps", "radar"):
        trained_on = AutoDraftPolicy.from_pretrained(shipped_checkpoint(name)).trained_on
        verdict = "fits this curve" if trained_on == curve else "trained on another curve: retrain it on this profile"
        lines.append(f"shipped {name} policy: trained on {trained_on}; {verdict}")
    return lines
