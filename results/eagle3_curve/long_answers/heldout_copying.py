"""Does training teach the drafter to copy? Held-out chains by copy length, per checkpoint (float32).

python results/eagle3_curve/long_answers/heldout_copying.py --checkpoint artifacts/eagle3-smollm2-stage6 \
    --checkpoint artifacts/eagle3-smollm2-stage15

On the first assistant turn of the curve's 64 held-out conversations (cut at 1,024 tokens), every answer position
gets the chain a greedy chain of depth 6 accepts (the held-out measure, `HeldOutSet`) and its copy length: how many
of the 6 tokens after the root equal the tokens after the most recent earlier occurrence of the root's last two
tokens (copying.py's rule, prompt lookup's). A drafter that copies accepts the copy length where it is long.
"""

from __future__ import annotations

import argparse
import collections

import torch

import hf_adaptive_spec as hfas
from copying import DEPTH, common_prefix, continuation_after_match, print_copy_table
from hf_adaptive_spec.training.eagle3 import HeldOutSet, load_samples


def first_turns(tokenizer, path: str, conversations: int, max_length: int) -> list[dict]:
    turns = []
    for sample in load_samples(tokenizer, path, max_length, conversations):
        mask = sample["loss_mask"]
        first = mask.index(1)
        end = next((i for i in range(first, len(mask)) if not mask[i]), len(mask))
        turns.append({"input_ids": sample["input_ids"][:end], "loss_mask": mask[:end]})
    return turns


def copy_lengths(input_ids: list[int], loss_mask: list[int]) -> list[int]:
    """Per answer position in HeldOutSet's order: the chain rooted at draft position t drafts token t + 2 first,
    and t counts when token t + 2 is an answer token (the TTT steps' ``answer_mask``)."""
    answer = [u - 2 for u, m in enumerate(loss_mask) if m and u >= 2]
    return [common_prefix(continuation_after_match(input_ids[: t + 2], DEPTH), input_ids[t + 2 : t + 2 + DEPTH])
            for t in answer]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", action="append", required=True)
    parser.add_argument("--heldout", default="artifacts/eagle3_heldout_regenerated.jsonl")
    parser.add_argument("--conversations", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=1024)
    args = parser.parse_args()
    torch.set_num_threads(2)
    model, tokenizer = hfas.load_default_model(dtype=torch.float32)
    turns = first_turns(tokenizer, args.heldout, args.conversations, args.max_length)
    for checkpoint in args.checkpoint:
        drafter = hfas.Eagle3Drafter.from_pretrained(checkpoint, target=model)
        table = collections.defaultdict(list)
        for turn in turns:
            counts = HeldOutSet(model, [turn], drafter.model, depth=DEPTH).evaluate(drafter.model)
            chains = counts.accepted[0].tolist()
            copies = copy_lengths(turn["input_ids"], turn["loss_mask"])
            assert len(chains) == len(copies), (len(chains), len(copies))
            for copy, accepted in zip(copies, chains):
                table[copy].append(accepted)
        total = sum(len(v) for v in table.values())
        every = [a for v in table.values() for a in v]
        print(f"\n{checkpoint}: {total} positions, chain τ({DEPTH}) {1 + sum(every) / total:.3f}")
        print_copy_table(table, "positions", "chain accepted, mean")
        print("\nDraft step k right, given steps 1..k-1 right (chains reaching k / chains reaching k - 1):")
        print("| copy length (of 6) | " + " | ".join(f"step {k}" for k in range(1, DEPTH + 1)) + " |")
        print("|---|" + "---|" * DEPTH)
        for copy in sorted(table):
            reached = [sum(a >= k for a in table[copy]) for k in range(DEPTH + 1)]
            print(f"| {copy} | " + " | ".join(
                f"{reached[k] / reached[k - 1]:.3f}" if reached[k - 1] else "–" for k in range(1, DEPTH + 1)) + " |")


if __name__ == "__main__":
    main()
