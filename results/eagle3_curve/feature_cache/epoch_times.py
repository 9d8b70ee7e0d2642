"""Seconds per pass over the same conversations with and without the EAGLE-3 trainer's feature cache.

    python results/eagle3_curve/feature_cache/epoch_times.py --conversations 48 --epochs 3

Stage 18's CPU recipe (SmolLM2 target in bfloat16, the stage-15 drafter, 512 tokens, batch 4 x 2, 5 TTT steps,
bf16 mixed precision) trained for ``--epochs`` passes over ``--conversations`` of target14 (every ``--stride``-th:
the file's mix of short and long answers), once without
a cache and once with a fresh one (its first pass fills it, the others read it; ``--cache-first`` swaps the order);
one JSON line per pass.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch
from transformers import TrainerCallback

from hf_adaptive_spec.drafters.eagle3.modeling import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import Eagle3Config, Eagle3Trainer, collate, load_samples, padding_id
from hf_adaptive_spec.training.eagle3.script import load_target


class EpochClock(TrainerCallback):
    def __init__(self, arm: str):
        self.arm, self.started = arm, None

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_epoch_end(self, args, state, control, **kwargs):
        seconds = time.perf_counter() - self.started
        print(json.dumps({"arm": self.arm, "epoch": round(state.epoch), "seconds": round(seconds, 1)}), flush=True)


def train(arm: str, target, tokenizer, samples, epochs: int, cache_dir: str | None, output_dir: str) -> None:
    draft = Eagle3DraftModel.from_pretrained("artifacts/eagle3-smollm2-stage15", target=target, dtype=torch.float32)
    args = Eagle3Config(
        output_dir=output_dir, num_train_epochs=epochs, per_device_train_batch_size=4, gradient_accumulation_steps=2,
        learning_rate=5e-5, warmup_ratio=0.05, ttt_steps=5, max_length=512, bf16=True, use_cpu=True, seed=18,
        logging_steps=1000, save_strategy="no", report_to=[], disable_tqdm=True, dataloader_num_workers=0,
        feature_cache_dir=cache_dir,
    )
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=padding_id(tokenizer)),
                            callbacks=[EpochClock(arm)])
    trainer.train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="artifacts/sharegpt_smollm2_target14.jsonl")
    parser.add_argument("--conversations", type=int, default=48)
    parser.add_argument("--stride", type=int, default=397, help="Take every N-th conversation of the file.")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--num-threads", type=int, default=2)
    parser.add_argument("--cache-first", action="store_true", help="Train the cached arm first.")
    options = parser.parse_args()
    torch.set_num_threads(options.num_threads)
    target, tokenizer = load_target("default", "bfloat16")
    samples = load_samples(tokenizer, options.data, 512)[:: options.stride][: options.conversations]
    tokens = sum(len(s["input_ids"]) for s in samples)
    print(json.dumps({"conversations": len(samples), "tokens": tokens}), flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        arms = [("no cache", None), ("cache", scratch + "/cache")]
        for arm, cache_dir in reversed(arms) if options.cache_first else arms:
            train(arm, target, tokenizer, samples, options.epochs, cache_dir, f"{scratch}/{arm}")


if __name__ == "__main__":
    main()
