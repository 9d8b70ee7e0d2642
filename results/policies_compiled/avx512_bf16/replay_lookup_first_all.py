"""Session 68: the three learned policies with `lookup_first=True`, trained on the 100-conversation 2-turn held-out
recording (train_lookup_first_all.sh), replayed against LookupFirstPolicy 2/4/8 (the best static tree live in
sessions 66-67), 1/4/4, the shipped LTD (lookup_first, 48 conversations) and session 64's RADAR and Re-SpS (trained
without lookup_first), on the 100-conversation recording (which the policies trained on, whole but for their held-out
prompts) and on the Spec-Bench first-turn recording, all with the 4-token branch (log: replay_lookup_first_all.log):

    python results/policies_compiled/avx512_bf16/replay_lookup_first_all.py
"""
import torch

from hf_adaptive_spec.policies import LookupFirstPolicy, StaticTreePolicy
from hf_adaptive_spec.profiling import HardwareProfile
from replay_table import replay_and_print  # beside this script

torch.set_num_threads(1)
profile = HardwareProfile.load("results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512.json")
policies = {
    "1/4/4": StaticTreePolicy(1, 4, 4), "lookup-first 2/4/8": LookupFirstPolicy(2, 4, 8),
    "LTD shipped (lookup-first, 48 conv.)": "hf_adaptive_spec/checkpoints/ltd-smollm2-135m-instruct-bf16-compiled",
    "RADAR session 64": "artifacts/radar-smollm2-bf16-compiled-avx512",
    "Re-SpS session 64": "artifacts/resps-smollm2-bf16-compiled-avx512",
    "LTD lookup-first 100": "artifacts/ltd-smollm2-bf16-compiled-avx512-lookup-first-100",
    "RADAR lookup-first 100": "artifacts/radar-smollm2-bf16-compiled-avx512-lookup-first-100",
    "Re-SpS lookup-first 100": "artifacts/resps-smollm2-bf16-compiled-avx512-lookup-first-100",
}
recordings = ("artifacts/replay/heldout-2turns100-d6k4-shipped", "artifacts/replay/specbench13-d6k4-shipped")
replay_and_print(profile, policies, recordings)
