"""Session 67: LTD with `lookup_first=True` (a matched prompt-lookup chain is verified alone and nothing drafted, as
LookupFirstPolicy does; the heads decide the other cycles), trained on the 2-turn held-out recording, replayed against
1/4/4, LookupFirstPolicy 2/4/8 (the best static tree live in session 66), the shipped LTD variant and session 66's
2-turn LTD, on the 2-turn recording and on the Spec-Bench first-turn recording, all with the 4-token branch
(log: replay_lookup_first.log):

    python results/policies_compiled/avx512_bf16/replay_lookup_first.py [LTD_FOLDER ...]
"""
import sys

import torch

from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.policies import AutoDraftPolicy, LookupFirstPolicy, StaticTreePolicy
from hf_adaptive_spec.profiling import HardwareProfile
from replay_table import print_replayed  # beside this script

torch.set_num_threads(1)
profile = HardwareProfile.load("results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512.json")
policies = {
    "1/4/4": StaticTreePolicy(1, 4, 4), "lookup-first 2/4/8": LookupFirstPolicy(2, 4, 8),
    "LTD shipped": AutoDraftPolicy.from_pretrained("hf_adaptive_spec/checkpoints/ltd-smollm2-135m-instruct-bf16-compiled"),
    "LTD 2 turns": AutoDraftPolicy.from_pretrained("artifacts/ltd-smollm2-bf16-compiled-avx512-2turns"),
}
candidates = ["artifacts/ltd-smollm2-bf16-compiled-avx512-lookup-first", "artifacts/ltd-smollm2-bf16-compiled-avx512-lookup-first-48"]
for folder in sys.argv[1:] or candidates:
    policies[folder.rsplit("/", 1)[-1]] = AutoDraftPolicy.from_pretrained(folder)
recordings = ("heldout-2turns-d6k4-shipped", "heldout-2turns48-d6k4-shipped", "specbench13-d6k4-shipped")
for name in (f"artifacts/replay/{recording}" for recording in recordings):
    environment = ReplayEnvironment(load_recording(name), profile, lookup_tokens=4)
    replayed = {label: environment.replay(policy) for label, policy in policies.items()}
    print_replayed(name, environment.num_prompts, replayed)
