"""Per-cycle components in replay against live for the profile's tree, the best static tree and LTD (session 65):

    python results/policies_compiled/avx512_bf16/replay_vs_live.py RECORDING PROFILE PROGRESS

e.g. artifacts/replay/heldout-d6k4-shipped, profile_bf16_compiled_avx512.json and
trees_specbench39_bf16_compiled_avx512.progress.jsonl (log: replay_vs_live.log). For each method: the replay's
tokens/s, τ, draft, verify and policy milliseconds per cycle, depth and verified-size shares, then the same from
the live run's cycles; last, the live draft time by the depth of the verified tree."""

import collections
import sys

import numpy as np
import torch

from hf_adaptive_spec.bench.progress import read_progress
from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.policies import AutoDraftPolicy
from hf_adaptive_spec.policies.static import StaticTreePolicy
from hf_adaptive_spec.profiling import HardwareProfile

torch.set_num_threads(1)
RECORDING, PROFILE, PROGRESS = sys.argv[1:4]
RECORDS = read_progress(PROGRESS)[1]  # (question id, method) -> QuestionRecord
LTD = "hf_adaptive_spec/checkpoints/ltd-smollm2-135m-instruct-bf16-compiled"
POLICIES = {"eagle3+lookup+sized": StaticTreePolicy(2, 4, 8), "eagle3@1/4/4+lookup+sized": StaticTreePolicy(1, 4, 4),
            "eagle3-ltd+lookup+sized": AutoDraftPolicy.from_pretrained(LTD)}


def summary(name: str, cycles: list[dict]) -> None:
    if not cycles:
        return print(f"{name}: no cycles")
    n, tokens = len(cycles), sum(c["committed"] for c in cycles)
    seconds = sum(c["draft"] + c["verify"] + c["policy"] for c in cycles)
    mean = {key: 1e3 * np.mean([c[key] for c in cycles]) for key in ("draft", "verify", "policy")}
    print(f"{name:34s} tok/s {tokens / seconds:6.1f} (without other time) tau {tokens / n:.3f} ms/cycle: "
          + ", ".join(f"{key} {value:.2f}" for key, value in mean.items()))
    for key in ("depth", "verified"):
        shares = collections.Counter(c[key] for c in cycles)
        print(f"   {key}: " + ", ".join(f"{k}: {v / n:.3f}" for k, v in sorted(shares.items())))


def live_cycles(method: str) -> list[dict]:
    cycles = []
    for (_, name), record in RECORDS.items():
        if name != method:
            continue
        for turn in record.turns:
            policy = (turn.policy_time or 0.0) / len(turn.accepted_lengths)
            cycles += [dict(committed=a + 1, draft=d, verify=v, policy=policy, depth=depth, verified=n)
                       for a, d, v, depth, n in zip(turn.accepted_lengths, turn.draft_times, turn.verify_times,
                                                    turn.draft_depths, turn.verified_tokens)]
    return cycles


environment = ReplayEnvironment(load_recording(RECORDING), HardwareProfile.load(PROFILE), lookup_tokens=4)
for method, policy in POLICIES.items():
    replayed = environment.replay(policy).all_cycles
    summary("replay " + method, [dict(committed=c.committed_tokens, draft=c.draft_time, verify=c.verify_time,
                                      policy=c.policy_time, depth=c.draft_depth, verified=c.verified_tokens)
                                 for c in replayed])
    summary("live   " + method, live_cycles(method))
by_depth = collections.defaultdict(list)
for method in POLICIES:
    for cycle in live_cycles(method):
        by_depth[cycle["depth"]].append(cycle["draft"])
print("live draft time by the verified tree's depth: " + ", ".join(
    f"{depth}: {1e3 * np.median(v):.2f} ms median, {1e3 * np.mean(v):.2f} mean ({len(v)})"
    for depth, v in sorted(by_depth.items()) if len(v) >= 20))
