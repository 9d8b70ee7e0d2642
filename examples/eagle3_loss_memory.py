"""What recomputing the TTT loss's log-softmax and compiling the loss cost and save
(``Eagle3Config.recompute_loss_softmax``, ``Eagle3Config.compile_loss``): one forward+backward of the
training-time-test loss (5 steps) on the stage-12 drafter (12,288-token head) over 2 held-out
conversations cut at 256 tokens, in bfloat16 autocast as GPU training runs, kept, recomputed and
compiled, interleaved, median of 5 after one warm-up (which compiles); and the bytes of the distinct
storages autograd keeps for the backward pass.

    python examples/eagle3_loss_memory.py [--checkpoint DIR] [--heldout JSONL] [--conversations 2] [--max-length 256]

The held-out file is derived, not committed (artifacts/README.md says how to rebuild it).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import TargetFeatures, TTTBatch, collate, load_samples, ttt_loss
from hf_adaptive_spec.training.memory import kept_for_backward


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's inputs (defaults: the measurement the docstring describes); a missing held-out file is refused
    here, before any model loads."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--checkpoint", default="artifacts/eagle3-smollm2-stage12", help="EAGLE-3 drafter folder")
    parser.add_argument("--heldout", default="artifacts/eagle3_heldout_regenerated.jsonl",
                        help="JSONL of target-answered conversations (derived: artifacts/README.md)")
    parser.add_argument("--conversations", type=int, default=2, help="the first N conversations of --heldout")
    parser.add_argument("--max-length", type=int, default=256, help="tokens each conversation is cut at")
    parser.add_argument("--steps", type=int, default=5, help="training-time-test steps of the loss")
    parser.add_argument("--decay", type=float, default=0.8, help="the loss's per-step weight decay")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds after the warm-up (the median is shown)")
    parser.add_argument("--num-threads", type=int, default=2, help="torch's CPU threads")
    args = parser.parse_args(argv)
    if not Path(args.heldout).is_file():
        parser.error(f"--heldout: no file {args.heldout!r}; it is derived, not committed: artifacts/README.md says "
                     "how to rebuild it (or pass --heldout another JSONL of target-answered conversations)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.num_threads)
    model, tokenizer = hfas.load_default_model()
    draft = Eagle3DraftModel.from_pretrained(args.checkpoint, target=model).float().train()
    inputs = collate(load_samples(tokenizer, args.heldout, args.max_length, args.conversations), 0)
    features = TargetFeatures(model, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    with torch.no_grad():
        feats, target_logits = features(inputs["input_ids"], inputs["attention_mask"])
    batch = TTTBatch(inputs["input_ids"], feats, target_logits, inputs["loss_mask"])

    def loss(variant: tuple[bool, bool]) -> torch.Tensor:
        recompute, compiled = variant
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return ttt_loss(draft, batch, steps=args.steps, decay=args.decay, recompute_softmax=recompute,
                            compile_loss=compiled)[0]

    variants = {"recomputed": (True, False), "kept": (False, False), "compiled": (False, True)}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for repeat in range(args.repeats + 1):  # the first round warms up
        for name, variant in variants.items():
            draft.zero_grad()
            start = time.perf_counter()
            loss(variant).backward()
            if repeat:
                times[name].append(time.perf_counter() - start)
    for name, variant in variants.items():
        _, kept = kept_for_backward(lambda: loss(variant))  # noqa: B023 (called within the iteration)
        print(f"{name}: median {statistics.median(times[name]):.3f} s per forward+backward, "
              f"autograd keeps {kept / 1e6:.1f} MB", flush=True)
    print("shape", tuple(batch.input_ids.shape), "draft vocab", draft.config.draft_vocab_size)


if __name__ == "__main__":
    main()
