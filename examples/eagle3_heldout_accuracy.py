"""First-draft acceptance, accuracy by draft depth and greedy chain τ of an EAGLE-3 drafter on
several sets of conversations the target answered itself (e.g. trained-on against held-out).

    python examples/eagle3_heldout_accuracy.py \
        --set "held out=artifacts/eagle3_heldout_regenerated.jsonl" \
        --set "never trained on=artifacts/sharegpt_smollm2_regenerated_extra4.jsonl" \
        --set "trained on in stage 1=artifacts/sharegpt_smollm2_regenerated.jsonl" --conversations 64

Each set is its file's first ``--conversations`` conversations, measured as the trainer's held-out
curve measures them (:class:`~hf_adaptive_spec.training.eagle3.HeldOutSet`: the training-time test
with the data's tokens fed in, which is greedy chain drafting on the target's own answers), by default with a
float32 target and drafter as the curve; ``--target-dtype`` / ``--drafter-dtype bfloat16`` measure the shipped one
as the compiled bfloat16 path runs it.

``--widen-to`` also measures the drafter with its draft vocabulary widened before any training (as
``init_from`` with a larger ``draft_vocab_size`` starts a stage): the most frequent tokens of
``--vocabulary-from`` added, the trained head rows kept (:func:`~hf_adaptive_spec.training.eagle3.widen_vocabulary`):

    python examples/eagle3_heldout_accuracy.py --checkpoint artifacts/eagle3-smollm2-stage11 \
        --set "held out=artifacts/eagle3_heldout_regenerated.jsonl" --widen-to 12288 16384 \
        --vocabulary-from artifacts/sharegpt_smollm2_target9.jsonl artifacts/sharegpt_smollm2_sampled11.jsonl
"""

from __future__ import annotations

import argparse

import torch
from labelled_paths import labelled_files

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import HeldOutSet, build_draft_vocabulary, load_samples, widen_vocabulary


def measure(model, tokenizer, draft, sets: list[tuple[str, str]], args, name: str) -> None:
    """Print the held-out point of ``draft`` on each ``(label, JSONL)`` set, prefixed with ``name``."""
    for label, path in sets:
        held_out = HeldOutSet.from_jsonl(
            model, tokenizer, path, draft, args.max_length, args.conversations, args.depth, training=args.training
        )
        point = held_out.point(draft, step=0, input_tokens_seen=0)
        depths = " / ".join(f"{a:.4f}" for a in point.step_accuracy)
        copying = " / ".join(f"{a:.4f}" for a in point.copy_step_accuracy)
        print(f"{name}{label}: first-draft acceptance {point.first_draft_acceptance:.4f} "
              f"({point.in_vocabulary_acceptance:.4f} of "
              f"the {point.draft_vocab_coverage:.3f} in the draft vocabulary), by depth {depths}, "
              f"chain tau({args.depth}) {point.chain_tau:.4f} (decoding {point.decoding_tau:.4f}), "
              f"{point.positions} positions; "
              f"on the {point.copy_share:.3f} a prompt lookup would copy, by depth {copying}; "
              f"{len(held_out.samples)} conversations (set {held_out.digest})", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None, help="drafter (default: the shipped one)")
    parser.add_argument("--set", action="append", required=True, help="LABEL=JSONL of target-answered conversations")
    parser.add_argument("--conversations", type=int, default=64, help="the first N of each file")
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--num-threads", type=int, default=None)
    parser.add_argument("--target-dtype", choices=["float32", "bfloat16"], default="float32",
                        help="the target's dtype (its features and argmax; the trainer's curve: float32)")
    parser.add_argument("--drafter-dtype", choices=["float32", "bfloat16"], default="float32",
                        help="the drafter's dtype (the trainer's curve: float32; the shipped drafter: bfloat16)")
    parser.add_argument(
        "--widen-to", type=int, nargs="*", default=[], help="also measure at these draft vocabulary sizes"
    )
    parser.add_argument(
        "--vocabulary-from", nargs="*", default=[], help="JSONL conversations whose frequent tokens widen it"
    )
    parser.add_argument(
        "--exclude-prompts-of", nargs="*", default=[],
        help="training JSONL files: conversations of a set that open with one of their prompts are left out, as the "
        "trainer leaves them out of its held-out curve",
    )
    args = parser.parse_args(argv)
    sets = labelled_files(parser, "--set", args.set, "JSONL", hint=" (derived files: artifacts/README.md)")
    if args.widen_to and not args.vocabulary_from:
        parser.error("--widen-to needs --vocabulary-from: the conversations whose most frequent tokens are added")
    if args.vocabulary_from and not args.widen_to:
        parser.error("--vocabulary-from only widens the vocabulary to the sizes of --widen-to: give --widen-to "
                     "SIZE ..., or leave --vocabulary-from out")
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    model, tokenizer = hfas.load_default_model(dtype=getattr(torch, args.target_dtype))
    args.training = (
        [s for path in args.exclude_prompts_of for s in load_samples(tokenizer, path, args.max_length)]
        if args.exclude_prompts_of else None
    )
    draft = Eagle3DraftModel.from_pretrained(args.checkpoint or hfas.shipped_checkpoint("eagle3"), target=model)
    draft = draft.to(getattr(torch, args.drafter_dtype))
    measure(model, tokenizer, draft, sets, args, "")
    samples = [s for path in args.vocabulary_from for s in load_samples(tokenizer, path, 1024)]
    for size in args.widen_to:
        vocabulary = build_draft_vocabulary(samples, size, model.config.vocab_size, keep=draft.draft_to_target())
        widened = widen_vocabulary(draft, model, vocabulary).eval()
        measure(model, tokenizer, widened, sets, args, f"widened to {size}, ")


if __name__ == "__main__":
    main()
