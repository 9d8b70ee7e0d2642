"""Session 69: on the bucket-5 profile (profile_bucket5.sh), LTD retrained on it (bucket5_ltd_train.sh) against the
shipped LTD (trained on session 64's profile) and the static trees, replayed with the 4-token branch on the
100-conversation 2-turn held-out recording and on the Spec-Bench first-turn recording (log: replay_bucket5.log):

    python results/policies_compiled/avx512_bf16/replay_bucket5.py
"""
import torch

from hf_adaptive_spec.policies import LookupFirstPolicy, StaticTreePolicy
from hf_adaptive_spec.profiling import HardwareProfile
from replay_table import replay_and_print  # beside this script

torch.set_num_threads(1)
profile = HardwareProfile.load("results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512_bucket5.json")
policies = {
    "1/4/4": StaticTreePolicy(1, 4, 4), "2/4/8": StaticTreePolicy(2, 4, 8),
    "lookup-first 2/4/8": LookupFirstPolicy(2, 4, 8),
    "LTD shipped (session 64's profile)": "hf_adaptive_spec/checkpoints/ltd-smollm2-135m-instruct-bf16-compiled",
    "RADAR shipped (session 64's profile)": "hf_adaptive_spec/checkpoints/radar-smollm2-135m-instruct-bf16-compiled",
    "LTD lookup-first 100, bucket-5 profile": "artifacts/ltd-smollm2-bf16-compiled-avx512-lookup-first-100-bucket5",
}
recordings = ("artifacts/replay/heldout-2turns100-d6k4-shipped", "artifacts/replay/specbench13-d6k4-shipped")
replay_and_print(profile, policies, recordings)
