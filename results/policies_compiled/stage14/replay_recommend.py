"""Replay the three stage-14 policies with `hf-adaptive-spec profile`'s ranking (cli.recommend), as if shipped for
the compiled bfloat16 curve (run from the repository root; log: replay_recommend.log):

    python results/policies_compiled/stage14/replay_recommend.py
"""

from __future__ import annotations

from pathlib import Path

import torch

from hf_adaptive_spec import checkpoints
from hf_adaptive_spec.environments import load_recording
from hf_adaptive_spec.profiling import HardwareProfile, cli

RECORDING = "artifacts/replay/heldout-d6k4-stage14"
CURVE = "cpu/bfloat16/compiled"

torch.set_num_threads(2)
for name in cli.SHIPPED_POLICIES:
    checkpoints.SHIPPED_FOR_CURVE[(name, CURVE)] = str(Path(f"artifacts/{name}-smollm2-stage14").resolve())
profile = HardwareProfile.load("artifacts/replay/profile_bf16_compiled_stage14.json")
recordings = [load_recording(RECORDING)]
for lookup in (0, 4):
    result = cli.recommend(profile, recordings, [RECORDING], lookup)
    tree = result["tree"]["tokens_per_second"]
    print("lookup", lookup, "tree", result["tree"], "chosen", result["policy"])
    for name, entry in result["policies"].items():
        speed = entry.get("tokens_per_second")
        print("  ", name, speed, (speed or 0) / tree, entry.get("tau"), entry.get("not_replayed"))
