"""The stage-15 drafter's held-out point (32 conversations, depth 6) as the checked-out package measures it.

Run from the repository root. For another commit, run it from a folder without the package, with PYTHONPATH at that
commit's worktree and the artifact paths made absolute. Session 74 compared cc6ee27 with its own change: every field
was the same (heldout_point_cc6ee27.txt, heldout_point_session74.txt).

    python results/eagle3_curve/step_profile/loss_once/heldout_point.py
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3.heldout import HeldOutSet

FIELDS = ("first_draft_acceptance", "step_accuracy", "chain_tau", "positions", "decoding_tau", "copy_share",
          "copy_step_accuracy", "in_vocabulary_acceptance")


def main() -> None:
    torch.set_num_threads(2)
    model, tokenizer = hfas.load_default_model()
    draft = Eagle3DraftModel.from_pretrained("artifacts/eagle3-smollm2-stage15", target=model).float()
    held_out = HeldOutSet.from_jsonl(model, tokenizer, "artifacts/eagle3_heldout_regenerated.jsonl", draft, limit=32,
                                     depth=6)
    start = time.perf_counter()
    point = dataclasses.asdict(held_out.point(draft, step=0, input_tokens_seen=0))
    print(json.dumps({field: point[field] for field in FIELDS}))
    print(f"evaluate {time.perf_counter() - start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
