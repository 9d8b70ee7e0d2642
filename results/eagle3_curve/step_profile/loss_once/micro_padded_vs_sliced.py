"""The TTT loss alone (5 steps, forward and backward; random bfloat16 logits and target logits of stage 18's CPU
batch shape: 4 x 512 positions, 12,288-token draft vocabulary), median of 5 after a warm-up, three ways:
before (a padded copy of the target and its softmax per step), the target's distribution once with each step's
logits sliced to the positions inside the sequence, and once padded so that every step reads a full-length view.

    python results/eagle3_curve/step_profile/loss_once/micro_padded_vs_sliced.py
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from hf_adaptive_spec.training.eagle3.ttt import shift_positions

ROWS, LENGTH, VOCABULARY, STEPS = 4, 512, 12288, 5


def cross_entropy(logits, probs, mask):
    return (-(probs * torch.log_softmax(logits.float(), -1)).sum(-1) * mask).sum()


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    drafts = LENGTH - 1
    target = torch.randn(ROWS, LENGTH, VOCABULARY, dtype=torch.bfloat16)
    mask = (torch.rand(ROWS, LENGTH) > 0.3).float()
    logits = [torch.randn(ROWS, drafts, VOCABULARY, dtype=torch.bfloat16, requires_grad=True) for _ in range(STEPS)]

    def before():
        return sum(0.8**k * cross_entropy(z, torch.softmax(shift_positions(target, 1 + k, drafts).float(), -1),
                                          shift_positions(mask, 2 + k, drafts)) for k, z in enumerate(logits))

    def sliced():
        probs = torch.softmax(target.float(), -1)
        inside = [drafts - 1 - k for k in range(STEPS)]
        return sum(0.8**k * cross_entropy(z[:, :n], probs[:, 1 + k : 1 + k + n], mask[:, 2 + k : 2 + k + n])
                   for k, (z, n) in enumerate(zip(logits, inside)))

    def padded():
        probs = F.pad(torch.softmax(target.float(), -1), (0, 0, 0, STEPS))
        return sum(0.8**k * cross_entropy(z, probs[:, 1 + k : 1 + k + drafts], shift_positions(mask, 2 + k, drafts))
                   for k, z in enumerate(logits))

    variants = {"before": before, "once, sliced": sliced, "once, padded": padded}
    times = {name: [] for name in variants}
    for repeat in range(6):  # the first round warms up
        for name, loss in variants.items():
            start = time.perf_counter()
            loss().backward()
            if repeat:
                times[name].append(time.perf_counter() - start)
    for name, seconds in times.items():
        print(f"{name}: median {statistics.median(seconds):.3f} s")


if __name__ == "__main__":
    main()
