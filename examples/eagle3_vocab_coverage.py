"""How much of the target's answers a draft vocabulary can say: the ceiling it puts on acceptance.

An EAGLE-3 drafter predicts over a reduced vocabulary (the most frequent assistant tokens of its
training data); a token outside it can never be drafted. For each size this builds the vocabulary
from the training file, as the trainer does, and reports the share of the held-out answers' tokens
inside it, which bounds first-draft acceptance from above:

    python examples/eagle3_vocab_coverage.py --train artifacts/sharegpt_smollm2_target6.jsonl \
        --heldout artifacts/eagle3_heldout_regenerated.jsonl --sizes 2048,4096,8192,16384,32768
"""

from __future__ import annotations

import argparse

import torch
from int_lists import positive_ints

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import build_draft_vocabulary, load_samples


def answer_tokens(samples: list[dict[str, list[int]]]) -> torch.LongTensor:
    """Every assistant token of the samples (those the drafter is trained and measured on)."""
    return torch.tensor([t for s in samples for t, m in zip(s["input_ids"], s["loss_mask"]) if m], dtype=torch.long)


def coverage(vocabulary: torch.LongTensor, tokens: torch.LongTensor, vocab_size: int) -> float:
    inside = torch.zeros(vocab_size, dtype=torch.bool)
    inside[vocabulary] = True
    return inside[tokens].float().mean().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", required=True, help="JSONL the vocabulary is built from")
    parser.add_argument("--heldout", required=True, help="JSONL of held-out target-answered conversations")
    parser.add_argument("--sizes", type=positive_ints, default="2048,4096,8192,16384,32768",
                        help="draft vocabulary sizes")
    parser.add_argument("--max-length", type=int, default=512)
    args = parser.parse_args()
    model, tokenizer = hfas.load_default_model()
    vocab_size = model.config.vocab_size
    train = load_samples(tokenizer, args.train, args.max_length, None)
    held_out = answer_tokens(load_samples(tokenizer, args.heldout, args.max_length, None))
    print(f"{len(train)} training conversations, {held_out.numel()} held-out answer tokens, vocabulary {vocab_size}")
    print("| draft vocabulary | held-out answer tokens inside |\n|---|---|")
    for size in args.sizes:
        print(f"| {size:,} | {coverage(build_draft_vocabulary(train, size, vocab_size), held_out, vocab_size):.4f} |")
    shipped = Eagle3DraftModel.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
    print(f"| shipped drafter's ({shipped.config.draft_vocab_size:,}) | "
          f"{coverage(shipped.draft_to_target(), held_out, vocab_size):.4f} |")


if __name__ == "__main__":
    main()
