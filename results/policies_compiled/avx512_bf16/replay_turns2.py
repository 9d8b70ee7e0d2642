"""Session 66: `profile`'s ranking (ranking.recommend, the 4-token branch) on the held-out conversations recorded with
`record --turns 2` (24 first turns and their second turns), and the replay of 1/4/4, 2/4/8, LookupFirstPolicy 2/4/8,
the shipped LTD variant and LTD retrained on this recording, on it and on the Spec-Bench first-turn recording
(log: replay_turns2.log):

    python results/policies_compiled/avx512_bf16/replay_turns2.py
"""
import torch

from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.policies import AutoDraftPolicy, LookupFirstPolicy, StaticTreePolicy
from hf_adaptive_spec.profiling import HardwareProfile, ranking

torch.set_num_threads(1)
profile = HardwareProfile.load("results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512.json")
turns2 = load_recording("artifacts/replay/heldout-2turns-d6k4-shipped")
result = ranking.recommend(profile, [turns2], ["held-out, 2 turns"], (4,))
trees = [result["tree"], *result["runner_up_trees"]]
print(f"ranking on {len(turns2.prompts)} held-out prompts (first and second turns): " + "; ".join(
    f"{ranking.tree_description(t, 4)}: {t['tokens_per_second']:.1f} tok/s" for t in trees))
policies = {
    "1/4/4": StaticTreePolicy(1, 4, 4), "2/4/8": StaticTreePolicy(2, 4, 8), "lookup-first 2/4/8": LookupFirstPolicy(2, 4, 8),
    "LTD shipped": AutoDraftPolicy.from_pretrained("hf_adaptive_spec/checkpoints/ltd-smollm2-135m-instruct-bf16-compiled"),
    "LTD 2 turns": AutoDraftPolicy.from_pretrained("artifacts/ltd-smollm2-bf16-compiled-avx512-2turns"),
}
for name in ("artifacts/replay/heldout-2turns-d6k4-shipped", "artifacts/replay/specbench13-d6k4-shipped"):
    environment = ReplayEnvironment(load_recording(name), profile, lookup_tokens=4)
    replayed = {label: environment.replay(policy) for label, policy in policies.items()}
    base = replayed["1/4/4"].tokens_per_second
    print(f"{name} ({environment.num_prompts} prompts): " + ", ".join(
        f"{label} tau {r.mean_accepted_tokens:.3f} {r.tokens_per_second:.1f} tok/s ({r.tokens_per_second / base:.3f}x 1/4/4)"
        for label, r in replayed.items()))
