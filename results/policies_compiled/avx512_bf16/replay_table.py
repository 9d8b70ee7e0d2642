"""The lines replay_lookup_first.py (session 67), replay_lookup_first_all.py (session 68) and replay_bucket5.py (session
69) print per recording: each policy's replayed τ, tokens/s, ratios to 1/4/4 and to LookupFirstPolicy 2/4/8, and
policy time per cycle; and the last two's replay of every policy on each recording."""
from hf_adaptive_spec.environments import MultiReplayEnvironment, load_recording
from hf_adaptive_spec.policies import AutoDraftPolicy


def print_replayed(name: str, num_prompts: int, replayed: dict) -> None:
    """``replayed``: label -> ReplayResult, with the labels "1/4/4" and "lookup-first 2/4/8" among them."""
    base, best_static = (replayed[label].tokens_per_second for label in ("1/4/4", "lookup-first 2/4/8"))
    print(f"{name} ({num_prompts} prompts):")
    for label, r in replayed.items():
        cycles = r.all_cycles
        policy_ms = 1e3 * sum(c.policy_time for c in cycles) / len(cycles)
        print(f"  {label}: tau {r.mean_accepted_tokens:.3f}, {r.tokens_per_second:.1f} tok/s, "
              f"{r.tokens_per_second / base:.3f}x 1/4/4, {r.tokens_per_second / best_static:.3f}x lookup-first 2/4/8, "
              f"policy {policy_ms:.3f} ms/cycle", flush=True)


def replay_and_print(profile, policies: dict, recordings: tuple[str, ...], lookup_tokens: int = 4) -> None:
    """Replay ``policies`` (label -> policy, or the folder of a saved one) on each recording folder with the
    ``lookup_tokens`` branch and ``profile``'s costs, and print them. Re-SpS reads target features: the multi-recording
    environment passes them (one recording, top-k 4)."""
    policies = {label: AutoDraftPolicy.from_pretrained(p) if isinstance(p, str) else p for label, p in policies.items()}
    for name in recordings:
        environment = MultiReplayEnvironment([load_recording(name)], profile, lookup_tokens=lookup_tokens)
        replayed = {}
        for label, policy in policies.items():
            replayed[label] = environment.replay(policy)
            if hasattr(policy, "end_episode"):
                policy.end_episode()
        print_replayed(name, environment.num_prompts, replayed)
