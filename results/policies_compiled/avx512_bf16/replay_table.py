"""The lines replay_lookup_first.py (session 67) and replay_lookup_first_all.py (session 68) print per recording: each
policy's replayed τ, tokens/s, ratios to 1/4/4 and to LookupFirstPolicy 2/4/8, and policy time per cycle."""


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
