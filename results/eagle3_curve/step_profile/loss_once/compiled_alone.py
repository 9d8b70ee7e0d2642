"""The whole TTT loss (stage-15 drafter, 5 steps, forward and backward, bfloat16 autocast) on 4 batches of 4
held-out conversations cut at 512 tokens, plain against --compile_loss, alternated, after two batches of warm-up
(which compile); then the dynamo graphs compiled.

    python results/eagle3_curve/step_profile/loss_once/compiled_alone.py
"""

from __future__ import annotations

import time

import torch
import torch._dynamo

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import TargetFeatures, TTTBatch, collate, load_samples, ttt_loss


def main() -> None:
    torch.set_num_threads(2)
    model, tokenizer = hfas.load_default_model()
    draft = Eagle3DraftModel.from_pretrained("artifacts/eagle3-smollm2-stage15", target=model).float().train()
    samples = load_samples(tokenizer, "artifacts/eagle3_heldout_regenerated.jsonl", 512, 24)
    features = TargetFeatures(model, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    batches = []
    for first in range(0, 24, 4):
        inputs = collate(samples[first : first + 4], 0)
        with torch.no_grad():
            fused, target_logits = features(inputs["input_ids"], inputs["attention_mask"])
        mask = inputs["loss_mask"] * inputs["attention_mask"]
        batches.append(TTTBatch(inputs["input_ids"], fused, target_logits, mask))

    def forward_backward(batch: TTTBatch, compiled: bool) -> float:
        draft.zero_grad()
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = ttt_loss(draft, batch, steps=5, compile_loss=compiled)[0]
        loss.backward()
        return time.perf_counter() - start

    for batch in batches[:2]:
        forward_backward(batch, False), forward_backward(batch, True)
    seconds: dict[str, list[float]] = {"plain": [], "compiled": []}
    for batch in batches[2:]:
        for name in seconds:
            seconds[name].append(forward_backward(batch, name == "compiled"))
    for name, times in seconds.items():
        print(f"{name}: {', '.join(f'{t:.2f}' for t in times)} s")
    print("dynamo:", dict(torch._dynamo.utils.counters["stats"]))


if __name__ == "__main__":
    main()
