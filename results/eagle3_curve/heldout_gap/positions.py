"""Chain τ(6) of the held-out ShareGPT set by where in the first answer a position lies (float32, shipped drafter).

Spec-Bench decodes 128 tokens per turn; the held-out set's answers run to 512. If a drafter is right
less often early in an answer, the learning curve's τ overstates what 128-token turns get.

python results/eagle3_curve/heldout_gap/positions.py > results/eagle3_curve/heldout_gap/positions_stage15.log
"""
import argparse

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.training.eagle3 import HeldOutSet, load_samples

p = argparse.ArgumentParser()
p.add_argument("--heldout", default="artifacts/eagle3_heldout_regenerated.jsonl")
p.add_argument("--conversations", type=int, default=64)
p.add_argument("--checkpoint", default=None)
p.add_argument("--depth", type=int, default=6)
p.add_argument("--max-length", type=int, default=1024)
a = p.parse_args()
torch.set_num_threads(2)
model, tok = hfas.load_default_model(dtype=torch.float32)
drafter = hfas.Eagle3Drafter.from_pretrained(a.checkpoint or hfas.shipped_checkpoint("eagle3"), target=model)
buckets = [(0, 32), (32, 128), (128, 256), (256, 512), (512, 1024)]
sums = {b: [0, 0, 0] for b in buckets}  # accepted tokens, positions, first-draft hits
for sample in load_samples(tok, a.heldout, a.max_length, a.conversations):
    mask = sample["loss_mask"]
    first = mask.index(1)
    end = next((i for i in range(first, len(mask)) if not mask[i]), len(mask))
    first_turn = {"input_ids": sample["input_ids"][:end], "loss_mask": mask[:end]}
    counts = HeldOutSet(model, [first_turn], drafter.model, depth=a.depth).evaluate(drafter.model)
    chains = counts.accepted[0].tolist()
    for offset, accepted in enumerate(chains):
        for lo, hi in buckets:
            if lo <= offset < hi:
                sums[(lo, hi)][0] += accepted
                sums[(lo, hi)][1] += 1
                sums[(lo, hi)][2] += accepted > 0
print(f"first assistant turn of the first {a.conversations} held-out conversations, cut at {a.max_length} tokens")
for (lo, hi), (accepted, positions, hits) in sums.items():
    if positions:
        print(f"answer tokens {lo:4d}-{hi - 1:4d}: chain tau({a.depth}) {1 + accepted / positions:.3f}, "
              f"first-draft acceptance {hits / positions:.3f}, {positions} positions")
