"""Weight averaging of drafters trained from one start (stage 15 and the CPU stages that continued it): does the mean
of their weights draft better than each? Held-out first-draft acceptance and chain tau(3) on the 64 held-out
conversations, float32, as examples/eagle3_heldout_accuracy.py measures them.

    python results/eagle3_curve/weight_average/average.py --mix 15 --mix 19 --mix 15,19 --mix 15,18,19 --mix 18,19
    python results/eagle3_curve/weight_average/average.py --mix 19:2,15:-1 --mix 19:1.5,15:-0.5   # past stage 19
"""

from __future__ import annotations

import argparse

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import HeldOutSet

STAGES = {"15": "artifacts/eagle3-smollm2-stage15", "18": "artifacts/eagle3-smollm2-stage18-cpu",
          "19": "artifacts/eagle3-smollm2-stage19-cpu"}


def averaged(model, names: list[str], weights: list[float]) -> Eagle3DraftModel:
    """The drafter whose floating-point weights are the weighted mean of the named stages' (buffers: the first's)."""
    drafts = [Eagle3DraftModel.from_pretrained(STAGES[name], target=model).float() for name in names]
    first = drafts[0]
    for other in drafts[1:]:
        if not torch.equal(other.draft_to_target(), first.draft_to_target()):
            raise ValueError("the stages have different draft vocabularies: their head rows do not line up")
    with torch.no_grad():
        for key, tensor in first.state_dict().items():
            if tensor.is_floating_point() and not key.startswith("embed_tokens"):
                tensor.copy_(sum(w * d.state_dict()[key] for w, d in zip(weights, drafts)))
    return first.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mix", action="append", required=True, help="stages to average, e.g. 15,19 (equal weights) or 19:2,15:-1")
    parser.add_argument("--heldout", default="artifacts/eagle3_heldout_regenerated.jsonl")
    parser.add_argument("--conversations", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(2)
    model, tokenizer = hfas.load_default_model()
    held_out = None
    for mix in args.mix:
        parts = [part.partition(":") for part in mix.split(",")]  # NAME or NAME:WEIGHT (equal weights by default)
        names = [name for name, _, _ in parts]
        weights = [float(w) if w else 1.0 / len(parts) for _, _, w in parts]
        draft = averaged(model, names, weights)
        held_out = held_out or HeldOutSet.from_jsonl(model, tokenizer, args.heldout, draft, 512, args.conversations, 3)
        point = held_out.point(draft, step=0, input_tokens_seen=0)
        depths = " / ".join(f"{a:.4f}" for a in point.step_accuracy)
        print(f"stages {mix}: first-draft acceptance {point.first_draft_acceptance:.4f}, by depth {depths}, "
              f"chain tau(3) {point.chain_tau:.4f} (decoding {point.decoding_tau:.4f})", flush=True)


if __name__ == "__main__":
    main()
