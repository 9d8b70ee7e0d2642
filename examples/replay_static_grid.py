"""Rank static trees on a replay recording in seconds (modelled time from the hardware profile).

    python examples/replay_static_grid.py --recording artifacts/replay/sharegpt-k3 \
        --profile artifacts/replay/profile.json [--recording artifacts/replay/sharegpt-k2 ...]

Every ``StaticTreePolicy(depth, top_k, total_tokens)`` that a recording contains (its
``top_k``, depth and total_tokens up to the recorded ones) is replayed on all recorded
prompts, with plain one-token steps (depth 0) for reference; the table gives τ and the modelled
tokens/s, best first (on a bucketed static-path profile only the largest size of each bucket:
a smaller tree in the same bucket costs the same and accepts no more). ``--lookup-tokens 0,1,4`` ranks every
tree with each prompt-lookup branch length (0: none; depth 0 with a branch: the branch alone; each drafted tree
also as ``LookupFirstPolicy``, drafted only where the branch did not match). The
accepted lengths are exact for greedy decoding; confirm the few best shapes with
``hf-adaptive-spec bench``.
"""

from __future__ import annotations

import argparse

from hf_adaptive_spec.environments import load_recording
from hf_adaptive_spec.environments.static_grid import lookup_counts_from_text, rank_over_recordings
from hf_adaptive_spec.profiling.hardware import HardwareProfile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", action="append", required=True, help="recording folder (repeat for other top_k)")
    parser.add_argument("--profile", required=True, help="HardwareProfile JSON")
    parser.add_argument("--lookup-tokens", type=lookup_counts_from_text, default=(0,),
                        help="prompt-lookup branch lengths to rank every tree with, e.g. 0,1,4 (0: none)")
    parser.add_argument("--lookup-ngram-size", type=int, default=2, help="the branch's max_matching_ngram_size")
    parser.add_argument("--top", type=int, default=15, help="rows to print")
    args = parser.parse_args()
    profile = HardwareProfile.load(args.profile)
    one_token = 1.0 / (profile.verify_time(1))  # stock decoding's tokens/s in the same time model
    recordings = [load_recording(path) for path in args.recording]
    ranked = rank_over_recordings(recordings, profile, args.lookup_tokens, args.lookup_ngram_size)
    print(f"stock (one-token forward): {one_token:.1f} tokens/s in the profile's time model")
    print("| depth | top_k | total_tokens | lookup tokens | drafted | τ | modelled tokens/s | vs stock |")
    print("|---|---|---|---|---|---|---|---|")
    for tree in ranked[: args.top]:
        drafted = "where lookup missed" if tree.lookup_first else ("every cycle" if tree.depth else "never")
        print(f"| {tree.depth} | {tree.top_k} | {tree.total_tokens} | {tree.lookup_tokens} | {drafted} "
              f"| {tree.tau:.2f} | {tree.tokens_per_second:.1f} | {tree.tokens_per_second / one_token:.2f}× |")


if __name__ == "__main__":
    main()
