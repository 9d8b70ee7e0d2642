"""The share of a training batch's positions the TTT loss reads (answer tokens; padding and prompt excluded), for
stage 18's CPU batches (4 conversations drawn at random) and the GPU recipe's (64 grouped by length), over 400
conversations of target14 cut at 512 tokens; and the answers' share of the tokens.

    python results/eagle3_curve/step_profile/loss_once/loss_positions.py
"""

from __future__ import annotations

import random

import hf_adaptive_spec as hfas
from hf_adaptive_spec.training.eagle3 import collate, load_samples


def read_share(batches: list[list[dict]]) -> float:
    read = total = 0
    for batch in batches:
        inputs = collate(batch, 0)
        read += int((inputs["loss_mask"] * inputs["attention_mask"]).sum())
        total += inputs["input_ids"].numel()
    return read / total


def main() -> None:
    _, tokenizer = hfas.load_default_model()
    samples = load_samples(tokenizer, "artifacts/sharegpt_smollm2_target14.jsonl", 512, 400)
    random.seed(0)
    random.shuffle(samples)
    by_length = sorted(samples, key=lambda sample: len(sample["input_ids"]))
    answers = sum(sum(sample["loss_mask"]) for sample in samples) / sum(len(sample["input_ids"]) for sample in samples)
    print(f"answers' share of the tokens: {answers:.3f}")
    at_random = read_share([samples[i : i + 4] for i in range(0, 400, 4)])
    grouped = read_share([by_length[i : i + 64] for i in range(0, 400, 64)])
    print(f"positions read, batches of 4 at random: {at_random:.3f}; of 64 grouped by length: {grouped:.3f}")


if __name__ == "__main__":
    main()
