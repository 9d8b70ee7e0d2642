"""What each verification bucket costs inside ``generate`` for several StaticCache lengths.

    python examples/bucket_cost_by_cache_length.py --eagle3 artifacts/eagle3-smollm2-stage14 --slots 512,1024,1408 \
        --dtype bfloat16 --compile --num-threads 2

A static cache attends over every one of its slots, so what a cycle pays for a bucket depends on the cache
it decodes in, not only on the tokens verified. ``hf-adaptive-spec profile --cache-slots N`` measures one
length; this prints the table across lengths (two rounds, to show the spread), with the same
:func:`~hf_adaptive_spec.profiling.measure_buckets_in_generate` the profile uses.
"""

from __future__ import annotations

import argparse

import torch
from int_lists import positive_ints

from hf_adaptive_spec.default_model import load_model
from hf_adaptive_spec.drafters import Eagle3Drafter
from hf_adaptive_spec.generation import enable, fast_path_compile_config
from hf_adaptive_spec.generation.static_path import DEFAULT_BUCKETS
from hf_adaptive_spec.profiling import measure_buckets_in_generate

PROMPTS = (
    "Explain how a bicycle works, step by step.",
    "Write a short story about a lighthouse keeper.",
    "What are the main causes of inflation? Answer in detail.",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eagle3", required=True, help="EAGLE-3 drafter checkpoint")
    parser.add_argument("--slots", type=positive_ints, default="512,1024,1408", help="StaticCache lengths to time in")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--num-threads", type=int, default=None)
    parser.add_argument("--cycles-per-bucket", type=int, default=6, help="cycles each bucket gets per generate call")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    model, tokenizer = load_model(None, getattr(torch, args.dtype))
    enable(model)
    drafter = Eagle3Drafter.from_pretrained(args.eagle3, target=model)
    kwargs = {"compile_config": fast_path_compile_config(model.device)} if args.compile else {}
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)["input_ids"]
        for text in PROMPTS
    ]
    buckets = list(DEFAULT_BUCKETS)
    print("| cache slots | round | " + " | ".join(f"bucket {b} (ms per cycle)" for b in buckets) + " |")
    print("|---" * (len(buckets) + 2) + "|")
    for slots in args.slots:
        for round_ in range(args.rounds):
            per_prompt = [
                measure_buckets_in_generate(model, ids, drafter, buckets, slots, rounds=1,
                                            cycles_per_size=args.cycles_per_bucket, **kwargs)
                for ids in prompts
            ]
            means = [sum(values) / len(values) for values in zip(*per_prompt)]
            print(f"| {slots} | {round_ + 1} | " + " | ".join(f"{1000 * m:.1f}" for m in means) + " |", flush=True)


if __name__ == "__main__":
    main()
