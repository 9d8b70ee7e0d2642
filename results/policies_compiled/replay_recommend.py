"""Replay a stage's three retrained policies with `hf-adaptive-spec profile`'s ranking (ranking.recommend), as if
shipped for the compiled bfloat16 curve, on a given profile (run from the repository root):

    python results/policies_compiled/replay_recommend.py                     # log: replay_recommend.log
    python results/policies_compiled/replay_recommend.py --stage 11 \
        --profile artifacts/replay/profile_bf16_compiled_stage11_benchfit.json      # log: replay_fidelity.log

`--stage 11` replays the stage-11 policies on the stage-11 recording (artifacts/{name}-smollm2-stage11,
artifacts/replay/heldout-d6k4-stage11), which the stage-11 Spec-Bench run measured live. `--suffix=-slots512`
replays artifacts/{name}-smollm2-stage14-slots512, the policies retrained on the 512-slot profile.
`--recording R --policy-name small-buckets` replays artifacts/{name}-smollm2-small-buckets on recording R;
`--lookup-tokens 1` replays with the 1-token prompt-lookup branch only. `--curve cpu/float32/compiled` ships them for
the float32 curve (avx2_fp32/retrain.sh).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from hf_adaptive_spec import checkpoints
from hf_adaptive_spec.environments import load_recording
from hf_adaptive_spec.profiling import HardwareProfile, ranking

CURVE = "cpu/bfloat16/compiled"

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--stage", type=int, default=14)
parser.add_argument("--profile", default="artifacts/replay/profile_bf16_compiled_stage14.json")
parser.add_argument("--suffix", default="", help="after artifacts/{name}-smollm2-stage{stage}")
parser.add_argument("--recording", help="recording folder (default: artifacts/replay/heldout-d6k4-stage{stage})")
parser.add_argument("--policy-name", help="replay artifacts/{name}-smollm2-{policy_name} (default: stage{stage}{suffix})")
parser.add_argument("--curve", default=CURVE, help="the cost curve the policies are shipped for (device/dtype/path)")
parser.add_argument("--lookup-tokens", default="0,4", help="the prompt-lookup branch lengths to replay with (0: none)")
args = parser.parse_args()
torch.set_num_threads(2)
recording = args.recording or f"artifacts/replay/heldout-d6k4-stage{args.stage}"
policy_name = args.policy_name or f"stage{args.stage}{args.suffix}"
for name in ranking.SHIPPED_POLICIES:
    checkpoints.SHIPPED_FOR_CURVE[(name, args.curve)] = str(Path(f"artifacts/{name}-smollm2-{policy_name}").resolve())
profile = HardwareProfile.load(args.profile)
recordings = [load_recording(recording)]
print(f"{policy_name} policies on {recording}, profile {args.profile}")
for lookup in (int(n) for n in args.lookup_tokens.split(",")):
    result = ranking.recommend(profile, recordings, [recording], (lookup,))  # each with the branch and without
    tree = result["tree"]["tokens_per_second"]
    print("lookup", lookup, "tree", result["tree"], "chosen", result["policy"])
    for name, entry in result["policies"].items():
        speed = entry.get("tokens_per_second")
        print("  ", name, speed, (speed or 0) / tree, entry.get("tau"), entry.get("lookup_tokens"), entry.get("not_replayed"))
