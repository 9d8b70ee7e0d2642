"""Session 95: the three learned policies retrained on the AMX Xeon's compiled bfloat16 curve (retrain_amx.sh),
replayed with that curve's costs against LookupFirstPolicy 2/4/8 (the best static tree live here, session 94), 1/4/4,
and the shipped policies (trained on the AVX-512 EPYC's curve), on the 100-conversation recording (which the
policies trained on, whole but for their held-out prompts) and on Spec-Bench's first turns, 1 per category, recorded
here, all with the 4-token branch (log: replay_amx.log; run with replay_table.py's folder on the path):

    PYTHONPATH=results/policies_compiled/avx512_bf16 python results/session95/replay_amx.py
"""
from pathlib import Path

import torch

from hf_adaptive_spec.policies import LookupFirstPolicy, StaticTreePolicy
from hf_adaptive_spec.profiling import HardwareProfile
from replay_table import replay_and_print  # results/policies_compiled/avx512_bf16

torch.set_num_threads(1)
profile = HardwareProfile.load("results/policies_compiled/amx/profile_bf16_compiled_amx_rotation_b2.json")
policies = {
    "1/4/4": StaticTreePolicy(1, 4, 4), "lookup-first 2/4/8": LookupFirstPolicy(2, 4, 8),
    "LTD shipped (EPYC curve)": "hf_adaptive_spec/checkpoints/ltd-smollm2-135m-instruct-bf16-compiled",
    "RADAR shipped (EPYC curve)": "hf_adaptive_spec/checkpoints/radar-smollm2-135m-instruct-bf16-compiled",
    "LTD AMX curve": "artifacts/ltd-smollm2-bf16-compiled-amx-lookup-first-100",
    "RADAR AMX curve": "artifacts/radar-smollm2-bf16-compiled-amx-lookup-first-100",
    "Re-SpS AMX curve": "artifacts/resps-smollm2-bf16-compiled-amx-lookup-first-100",
}
recordings = tuple(name for name in ("artifacts/replay/heldout-2turns100-d6k4-shipped",
                                     "artifacts/replay/specbench13-d6k4-shipped") if Path(name).exists())
replay_and_print(profile, policies, recordings)
