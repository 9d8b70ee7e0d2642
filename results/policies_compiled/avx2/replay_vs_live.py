"""Modelled against live: each engine method of a bench run replayed on a recording with one or more profiles.

Ratios are to the prompt-lookup branch alone (eagle3@0/4/1+lookup+sized), in the replay (the recording's prompts) and
live (the bench's Spec-Bench turns). Usage:
    python replay_vs_live.py RECORDING BENCH.json PROFILE.json [PROFILE.json ...]
"""

import json
import sys

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.profiling import HardwareProfile

METHODS = {  # bench method: (policy, prompt-lookup branch)
    "eagle3@0/4/1+lookup+sized": (hfas.StaticTreePolicy(0, 4, 1), 1),
    "eagle3-lookup-first+lookup+sized": (hfas.LookupFirstPolicy(1, 4, 2), 1),
    "eagle3@1/4/2+sized": (hfas.StaticTreePolicy(1, 4, 2), 0),
}
REFERENCE = "eagle3@0/4/1+lookup+sized"


def live_speeds(bench: dict) -> dict[str, float]:
    speeds = {}
    for method in METHODS:
        turns = [turn for record in bench["records"] if record["method"] == method for turn in record["turns"]]
        speeds[method] = sum(t["new_tokens"] for t in turns) / sum(t["wall_time"] for t in turns)
    return speeds


def main() -> None:
    recording, bench = load_recording(sys.argv[1]), json.load(open(sys.argv[2]))
    live = live_speeds(bench)
    print("| method | live tok/s | live vs branch alone | " + " | ".join(f"modelled ({p})" for p in sys.argv[3:]) + " |")
    print("|---|---|---|" + "---|" * len(sys.argv[3:]))
    modelled = {}
    for path in sys.argv[3:]:
        profile = HardwareProfile.load(path)
        for method, (policy, lookup) in METHODS.items():
            modelled[path, method] = ReplayEnvironment(recording, profile, lookup_tokens=lookup).replay(policy).tokens_per_second
    for method in METHODS:
        cells = [f"{modelled[p, method]:.1f} tok/s, {modelled[p, method] / modelled[p, REFERENCE]:.3f}x" for p in sys.argv[3:]]
        print(f"| {method} | {live[method]:.1f} | {live[method] / live[REFERENCE]:.3f}x | " + " | ".join(cells) + " |")
    per_cycle_costs(bench, recording, sys.argv[3:])


def per_cycle_costs(bench: dict, recording, profiles: list[str]) -> None:
    """Milliseconds per cycle (draft + verify + policy), live against modelled, and τ: the cost model apart from how
    often the prompts let the branch or the drafter be right (the recording's prompts are not Spec-Bench's)."""
    print("\n| method | live ms/cycle (draft) | live τ | " + " | ".join(f"modelled ms/cycle (draft), τ ({p})" for p in profiles) + " |")
    print("|---|---|---|" + "---|" * len(profiles))
    for method, (policy, lookup) in METHODS.items():
        turns = [turn for record in bench["records"] if record["method"] == method for turn in record["turns"]]
        cycles = sum(len(t["accepted_lengths"]) for t in turns)
        live = sum(t["draft_time"] + t["verify_time"] + t["policy_time"] for t in turns) / cycles
        tau = 1 + sum(sum(t["accepted_lengths"]) for t in turns) / cycles
        cells = []
        for path in profiles:
            result = ReplayEnvironment(recording, HardwareProfile.load(path), lookup_tokens=lookup).replay(policy)
            replayed = result.all_cycles
            cells.append(f"{1000 * sum(c.seconds for c in replayed) / len(replayed):.1f} "
                         f"({1000 * sum(c.draft_time for c in replayed) / len(replayed):.1f}), {result.mean_accepted_tokens:.2f}")
        draft = 1000 * sum(t["draft_time"] for t in turns) / cycles
        print(f"| {method} | {1000 * live:.1f} ({draft:.1f}) | {tau:.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
