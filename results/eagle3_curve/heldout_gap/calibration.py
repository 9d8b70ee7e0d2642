"""Greedy acceptance of the draft's top-4 children against their draft probability, by TTT step and rank (held-out
ShareGPT answers, 512-token cut, the shipped stage 15, float32): is EAGLE-2's score (the draft probability) calibrated
for greedy verification?

python results/eagle3_curve/heldout_gap/calibration.py > results/eagle3_curve/heldout_gap/calibration_stage15.log
"""
import collections

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.training.eagle3 import HeldOutSet, load_samples
from hf_adaptive_spec.training.eagle3.ttt import TTTBatch, ttt_unroll

torch.set_num_threads(2)
model, tok = hfas.load_default_model(dtype=torch.float32)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
draft = drafter.model
samples = load_samples(tok, "artifacts/eagle3_heldout_regenerated.jsonl", 512, 64)
held_out = HeldOutSet(model, samples, draft, depth=3)
bins = collections.defaultdict(lambda: [0, 0, 0.0])  # (step, rank, pbin) -> hits, n, sum p
with torch.no_grad():
    for input_ids, fused, target_logits, loss_mask in held_out.samples:
        steps = ttt_unroll(draft, TTTBatch(input_ids, fused, target_logits, loss_mask), 3)
        for k, s in enumerate(steps):
            valid = s.answer_mask.bool()[0]
            probs = s.logits[0].float().softmax(-1)
            top_p, top_i = probs.topk(4, dim=-1)
            target_arg = s.target_argmax[0]
            in_vocab = s.mask.bool()[0]
            for r in range(4):
                hit = (top_i[:, r] == target_arg) & in_vocab
                for p, h in zip(top_p[valid, r].tolist(), hit[valid].tolist()):
                    b = min(int(p * 10), 9)
                    e = bins[(k, r, b)]; e[0] += h; e[1] += 1; e[2] += p
for k in range(3):
    for r in range(4):
        row = []
        for b in range(10):
            h, n, sp = bins[(k, r, b)]
            if n >= 30: row.append(f"p{b/10:.1f}: {sp/n:.2f}->{h/n:.2f} ({n})")
        print("step", k, "rank", r + 1, " | ".join(row))
