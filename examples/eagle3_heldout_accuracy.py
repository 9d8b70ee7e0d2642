"""Per-step draft accuracy of an EAGLE-3 drafter on conversations it trained on and on held-out ones.

    python examples/eagle3_heldout_accuracy.py --train 0:20 --held-out 1500:1520

Runs the training-time test in fp32, eval mode, one conversation at a time, and prints the
mean top-1 accuracy of each draft step (masked to assistant tokens in the draft vocabulary).
A large gap between the two sets means the drafter memorised its data.
"""

from __future__ import annotations

import argparse

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3.data import collate, read_conversations, tokenize_conversation
from hf_adaptive_spec.training.eagle3.features import TargetFeatures
from hf_adaptive_spec.training.eagle3.ttt import TTTBatch, ttt_loss


def span(text: str) -> slice:
    start, stop = text.split(":")
    return slice(int(start), int(stop))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None, help="drafter (default: the shipped one)")
    parser.add_argument("--dataset", default="artifacts/sharegpt_smollm2_regenerated.jsonl")
    parser.add_argument("--train", type=span, default=span("0:20"), help="START:STOP of trained-on conversations")
    parser.add_argument("--held-out", type=span, default=span("1500:1520"), help="START:STOP of unseen ones")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=640)
    args = parser.parse_args()
    model, tokenizer = hfas.load_default_model()
    draft = Eagle3DraftModel.from_pretrained(args.checkpoint or hfas.shipped_checkpoint("eagle3"), target=model).eval()
    features = TargetFeatures(model, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    conversations = list(read_conversations(args.dataset, None))
    for name, part in (("trained on", args.train), ("held out", args.held_out)):
        accuracies = []
        for conversation in conversations[part]:
            sample = tokenize_conversation(tokenizer, conversation, args.max_length)
            if not sample:
                continue
            batch = collate([sample], pad_token_id=0)
            with torch.no_grad():
                target_features, target_logits = features(batch["input_ids"], batch["attention_mask"])
                mask = batch["loss_mask"] * batch["attention_mask"]
                _, _, step_accuracy = ttt_loss(draft, TTTBatch(batch["input_ids"], target_features, target_logits, mask), args.steps)
            accuracies.append(step_accuracy)
        means = [sum(a[k] for a in accuracies) / len(accuracies) for k in range(args.steps)]
        print(f"{name:>10} ({len(accuracies)} conversations): " + "  ".join(f"step {k}: {m:.3f}" for k, m in enumerate(means)))


if __name__ == "__main__":
    main()
