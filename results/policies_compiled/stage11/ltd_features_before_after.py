"""LTD's hooks per cycle with its observations built by torch ops (678201f, before) and on the host (after), interleaved.

    python results/policies_compiled/stage11/ltd_features_before_after.py   # from the repository root
"""
import statistics, subprocess, sys, time, torch
sys.path.insert(0, "examples")
from policy_hook_time import one_cycle, synthetic_levels
from hf_adaptive_spec.policies import AutoDraftPolicy
from hf_adaptive_spec.policies.base import CycleState
import hf_adaptive_spec.policies.ltd.policy as ltd_policy
torch.set_num_threads(2)
import hf_adaptive_spec.policies.ltd.features as new
old_src = subprocess.run(["git", "show", "678201f:hf_adaptive_spec/policies/ltd/features.py"], capture_output=True, text=True, check=True).stdout.replace("from ..base import", "from hf_adaptive_spec.policies.base import")
old = type(sys)("old_features"); exec(compile(old_src, "old_features.py", "exec"), old.__dict__)
policy = AutoDraftPolicy.from_pretrained("artifacts/ltd-smollm2-stage11")
g = torch.Generator().manual_seed(0)
cycles = [synthetic_levels(4, 6, g) for _ in range(300)]
def run(module):
    for name in ("depth_observation", "size_observation", "size_action_mask"):
        setattr(ltd_policy, name, getattr(module, name))
    start = time.perf_counter()
    with torch.no_grad():
        for i, levels in enumerate(cycles):
            one_cycle(policy, CycleState(200 + i), levels)
    return (time.perf_counter() - start) / len(cycles) * 1e6
times = {"torch ops (before)": [], "host (after)": []}
for _ in range(8):
    times["torch ops (before)"].append(run(old)); times["host (after)"].append(run(new))
for k, v in times.items():
    print(f"{k}: {statistics.median(v[1:]):.0f} us per cycle (median of 7; {', '.join(f'{x:.0f}' for x in v[1:])})")
