"""`profile`'s ranking (ranking.recommend, the 4-token branch) on the held-out first turns and on them pooled with the
second turns record_second_turns.py recorded (session 65; log: recommend_pooled.log):

    python results/policies_compiled/avx512_bf16/recommend_pooled.py
"""
import torch

from hf_adaptive_spec.environments import load_recording
from hf_adaptive_spec.environments.recording import ReplayRecording
from hf_adaptive_spec.profiling import HardwareProfile, ranking

torch.set_num_threads(1)
profile = HardwareProfile.load("results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512.json")
first = load_recording("artifacts/replay/heldout-d6k4-shipped")
pooled = ReplayRecording.concatenate([first, load_recording("artifacts/replay/heldout-turn2-d6k4-shipped")])
for name, recording in (("first turns (24)", first), ("first turns (24) + second turns (16)", pooled)):
    result = ranking.recommend(profile, [recording], [name], (4,))
    trees = [result["tree"], *result["runner_up_trees"]]
    print(f"{name}: " + "; ".join(
        f"{ranking.tree_description(t, 4)}: {t['tokens_per_second']:.1f} tok/s" for t in trees)
        + f" | shipped LTD {result['policies']['ltd'].get('tokens_per_second', 0) / trees[0]['tokens_per_second']:.3f}x the first")
