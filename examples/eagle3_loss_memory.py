"""What recomputing the TTT loss's log-softmax and compiling the loss cost and save
(``Eagle3Config.recompute_loss_softmax``, ``Eagle3Config.compile_loss``): one forward+backward of the
training-time-test loss (5 steps) on the stage-12 drafter (12,288-token head) over 2 held-out
conversations cut at 256 tokens, in bfloat16 autocast as GPU training runs, kept, recomputed and
compiled, interleaved, median of 5 after one warm-up (which compiles); and the bytes of the distinct
storages autograd keeps for the backward pass.

    python examples/eagle3_loss_memory.py
"""

from __future__ import annotations

import statistics
import time

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import TargetFeatures, TTTBatch, collate, load_samples, ttt_loss
from hf_adaptive_spec.training.memory import kept_for_backward


def main() -> None:
    torch.set_num_threads(2)
    model, tokenizer = hfas.load_default_model()
    draft = Eagle3DraftModel.from_pretrained("artifacts/eagle3-smollm2-stage12", target=model).float().train()
    inputs = collate(load_samples(tokenizer, "artifacts/eagle3_heldout_regenerated.jsonl", 256, 2), 0)
    features = TargetFeatures(model, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    with torch.no_grad():
        feats, target_logits = features(inputs["input_ids"], inputs["attention_mask"])
    batch = TTTBatch(inputs["input_ids"], feats, target_logits, inputs["loss_mask"])

    def loss(variant: tuple[bool, bool]) -> torch.Tensor:
        recompute, compiled = variant
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return ttt_loss(draft, batch, steps=5, decay=0.8, recompute_softmax=recompute, compile_loss=compiled)[0]

    variants = {"recomputed": (True, False), "kept": (False, False), "compiled": (False, True)}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for repeat in range(6):  # the first round warms up
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
