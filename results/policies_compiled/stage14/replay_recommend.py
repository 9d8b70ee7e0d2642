"""Replay the three stage-14 policies with `hf-adaptive-spec profile`'s ranking (cli.recommend), as if shipped for
the compiled bfloat16 curve: python results/policies_compiled/stage14/replay_recommend.py (log: replay_recommend.log)."""
import json, sys, torch
torch.set_num_threads(2)
from hf_adaptive_spec import checkpoints
from hf_adaptive_spec.environments import load_recording
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.profiling import cli
curve = "cpu/bfloat16/compiled"
for name in ("ltd", "resps", "radar"):
    checkpoints.SHIPPED_FOR_CURVE[(name, curve)] = f"/work/main/artifacts/{name}-smollm2-stage14"
profile = HardwareProfile.load("artifacts/replay/profile_bf16_compiled_stage14.json")
rec = [load_recording("artifacts/replay/heldout-d6k4-stage14")]
for lookup in (0, 4):
    r = cli.recommend(profile, rec, ["artifacts/replay/heldout-d6k4-stage14"], lookup)
    tree = r["tree"]["tokens_per_second"]
    print("lookup", lookup, "tree", r["tree"], "chosen", r["policy"])
    for n, e in r["policies"].items():
        print("  ", n, e.get("tokens_per_second"), (e.get("tokens_per_second") or 0) / tree, e.get("tau"), e.get("not_replayed"))
