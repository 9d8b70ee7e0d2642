"""First-draft acceptance, accuracy by draft depth and greedy chain τ of an EAGLE-3 drafter on
several sets of conversations the target answered itself (e.g. trained-on against held-out).

    python examples/eagle3_heldout_accuracy.py \
        --set "held out=artifacts/eagle3_heldout_regenerated.jsonl" \
        --set "never trained on=artifacts/sharegpt_smollm2_regenerated_extra4.jsonl" \
        --set "trained on in stage 1=artifacts/sharegpt_smollm2_regenerated.jsonl" --conversations 64

Each set is its file's first ``--conversations`` conversations, measured as the trainer's held-out
curve measures them (:class:`~hf_adaptive_spec.training.eagle3.HeldOutSet`: the training-time test
with the data's tokens fed in, which is greedy chain drafting on the target's own answers).
"""

from __future__ import annotations

import argparse

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import HeldOutSet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None, help="drafter (default: the shipped one)")
    parser.add_argument("--set", action="append", required=True, help="LABEL=JSONL of target-answered conversations")
    parser.add_argument("--conversations", type=int, default=64, help="the first N of each file")
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--num-threads", type=int, default=None)
    args = parser.parse_args()
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    model, tokenizer = hfas.load_default_model()
    draft = Eagle3DraftModel.from_pretrained(args.checkpoint or hfas.shipped_checkpoint("eagle3"), target=model).float()
    for spec in args.set:
        label, _, path = spec.partition("=")
        held_out = HeldOutSet.from_jsonl(model, tokenizer, path, draft, args.max_length, args.conversations, args.depth)
        point = held_out.point(draft, step=0, input_tokens_seen=0)
        depths = " / ".join(f"{a:.4f}" for a in point.step_accuracy)
        print(f"{label}: first-draft acceptance {point.first_draft_acceptance:.4f} ({point.in_vocabulary_acceptance:.4f} of "
              f"the {point.draft_vocab_coverage:.3f} in the draft vocabulary), by depth {depths}, "
              f"chain tau({args.depth}) {point.chain_tau:.4f}, {point.positions} positions", flush=True)


if __name__ == "__main__":
    main()
