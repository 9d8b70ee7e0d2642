"""The ceiling for any draft policy on a replay recording: per cycle, the best of a set of tree shapes in hindsight.

    python examples/replay_oracle.py --recording artifacts/replay/sharegpt-d3k8 \
        --profile artifacts/replay/profile.json

Every tree shape is replayed at every recorded position (exact accepted lengths, modelled time).
A dynamic programme over positions then picks, for each cycle, the shape that minimises the time
to finish the generation, knowing the future. No policy that sees only the drafts and the context
can beat it; a policy's share of the gap between the static tree and this ceiling says how much
of the available gain it takes.
"""

from __future__ import annotations

import argparse

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.environments.static_grid import recorded_tree_shapes
from hf_adaptive_spec.profiling.hardware import HardwareProfile


PLAIN_STEP = "plain step"


def shape_name(depth: int, total_tokens: int) -> str:
    return f"depth {depth}, {total_tokens} tokens"


def recorded_shapes(environment: ReplayEnvironment) -> dict[str, hfas.StaticTreePolicy]:
    """A plain step and every ``(depth, total_tokens)`` tree the recording can replay, at its top_k
    (on a bucketed profile one size per bucket: a smaller tree in the same bucket costs the same)."""
    k = environment.recording.tree_config.top_k
    shapes = {PLAIN_STEP: hfas.StaticTreePolicy(depth=0, top_k=k, total_tokens=1)}
    for depth, top_k, total_tokens in recorded_tree_shapes(environment.recording, environment.profile):
        shapes[shape_name(depth, total_tokens)] = hfas.StaticTreePolicy(depth, top_k, total_tokens)
    return shapes


def replay_outcomes(environment: ReplayEnvironment, prompt: int, shapes: dict[str, hfas.StaticTreePolicy]) -> dict:
    """``(position, shape) -> (tokens advanced, modelled seconds)`` for every recorded position of ``prompt``."""
    outcomes = {}
    for position in range(environment.num_positions(prompt)):
        for name, policy in shapes.items():
            cycle = environment.replay_cycle(prompt, position, policy)
            outcomes[position, name] = (cycle.accepted_length + 1, cycle.draft_time + cycle.verify_time)
    return outcomes


def least_seconds(outcomes: dict, positions: int, allowed: list[str]) -> float:
    """Least time to finish the generation from position 0, choosing among ``allowed`` per cycle."""
    best = [0.0] * (positions + 1)
    for position in range(positions - 1, -1, -1):
        best[position] = min(
            seconds + best[min(position + advanced, positions)]
            for advanced, seconds in (outcomes[position, name] for name in allowed)
        )
    return best[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", required=True, help="recording folder")
    parser.add_argument("--profile", required=True, help="HardwareProfile JSON")
    parser.add_argument("--lookup-tokens", type=int, default=0, help="replay the prompt-lookup branch of N tokens")
    parser.add_argument("--static", default="1,8,8", help="depth,top_k,total_tokens of the static tree to compare with")
    args = parser.parse_args()
    recording, profile = load_recording(args.recording), HardwareProfile.load(args.profile)
    environment = ReplayEnvironment(recording, profile, lookup_tokens=args.lookup_tokens)
    shapes = recorded_shapes(environment)
    depth, top_k, total_tokens = (int(x) for x in args.static.split(","))
    static = environment.replay(hfas.StaticTreePolicy(depth, top_k, total_tokens))
    tokens = sum(c.accepted_length + 1 for c in static.all_cycles)
    depth_one = [name for name in shapes if name.startswith("depth 1,")]
    choices = {
        f"static tree {args.static}": [shape_name(depth, total_tokens)],
        "plain step or the static tree": [PLAIN_STEP, shape_name(depth, total_tokens)],
        "plain step or any depth-1 tree": [PLAIN_STEP] + depth_one,
        "any recorded shape": list(shapes),
    }
    print(f"{environment.num_prompts} prompts, {tokens} tokens; static tree {args.static}: {static.tokens_per_second:.2f} tokens/s")
    print("| per-cycle choice, in hindsight | tokens/s | vs static tree |")
    print("|---|---|---|")
    per_prompt = [(replay_outcomes(environment, p, shapes), environment.num_positions(p)) for p in range(environment.num_prompts)]
    for label, allowed in choices.items():
        seconds = sum(least_seconds(outcomes, positions, allowed) for outcomes, positions in per_prompt)
        print(f"| {label} | {tokens / seconds:.2f} | {tokens / seconds / static.tokens_per_second:.3f}x |")


if __name__ == "__main__":
    main()
