"""The ceiling for any draft policy on a replay recording: per cycle, the best of a set of tree shapes in hindsight.

    python examples/replay_oracle.py --recording artifacts/replay/sharegpt-d3k8 \
        --profile artifacts/replay/profile.json

Every tree shape is replayed at every recorded position (exact accepted lengths, modelled time).
A dynamic programme over positions then picks, for each cycle, the shape that minimises the time
to finish the generation, knowing the future. No policy that sees only the drafts and the context
can beat it; a policy's share of the gap between the static tree and this ceiling says how much
of the available gain it takes.

The programme's state is the position and the committed tokens the drafter has not read yet: a
cycle that drafts nothing leaves them for the next drafting cycle's first step, which the profile's
catch-up table prices (``HardwareProfile.draft_time``), so skipping the drafter is not free.

`--lookup-first` compares with `LookupFirstPolicy` (the static tree drafted only where the prompt-lookup
branch did not match; with `--lookup-tokens`) rather than with the static tree on every cycle.
"""

from __future__ import annotations

import argparse
import sys
from functools import cache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.environments.replay import ReplayedCycle
from hf_adaptive_spec.environments.static_grid import recorded_tree_shapes
from hf_adaptive_spec.profiling.hardware import HardwareProfile, unread_after

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


def static_shape(parser: argparse.ArgumentParser, text: str, shapes: dict[str, hfas.StaticTreePolicy],
                 top_k: int) -> tuple[int, int, int]:
    """``--static DEPTH,TOP_K,TOTAL_TOKENS`` as ints, refused by the parser unless it is one of ``shapes`` (the
    recording's, at its ``top_k``): a shape outside them stopped in a lookup (KeyError, "... is not in list"), and
    another top_k was compared under its name at the recording's."""
    try:
        depth, static_top_k, total_tokens = (int(part) for part in text.split(","))
    except ValueError:
        parser.error(f"--static takes DEPTH,TOP_K,TOTAL_TOKENS (e.g. 1,8,8), got {text!r}")
    if static_top_k != top_k or shape_name(depth, total_tokens) not in shapes:
        replayable = "; ".join(f"{policy.depth},{top_k},{policy.total_tokens}" for name, policy in shapes.items()
                               if name != PLAIN_STEP)
        parser.error(f"--static {text} is not among the shapes this recording replays on this profile (top_k {top_k}): "
                     f"give one of {replayable}")
    return depth, static_top_k, total_tokens


def replay_outcomes(
    environment: ReplayEnvironment, prompt: int, shapes: dict[str, hfas.StaticTreePolicy]
) -> dict[tuple[int, str], ReplayedCycle]:
    """``(position, shape) -> cycle`` for every recorded position of ``prompt`` (replayed with one unread token:
    :func:`cycle_seconds` charges the drafter's catch-up for the tokens actually unread)."""
    return {
        (position, name): environment.replay_cycle(prompt, position, policy, unread_tokens=1)
        for position in range(environment.num_positions(prompt))
        for name, policy in shapes.items()
    }


def cycle_seconds(cycle: ReplayedCycle, unread_tokens: int, profile: HardwareProfile) -> float:
    """Modelled drafting and verification time of ``cycle`` when the drafter has ``unread_tokens`` to read."""
    return cycle.verify_time + profile.draft_time(cycle.draft_levels, unread_tokens)


def least_seconds(
    outcomes: dict, positions: int, allowed: list[str], profile: HardwareProfile, prompt_length: int
) -> float:
    """Least time to finish the generation from position 0, choosing among ``allowed`` per cycle; the state is
    the position and the tokens the drafter has not read (the prompt at the start)."""

    @cache
    def best(position: int, unread: int) -> float:
        if position >= positions:
            return 0.0
        return min(
            cycle_seconds(cycle, unread, profile)
            + best(position + cycle.committed_tokens, unread_after(unread, cycle.drafted, cycle.committed_tokens))
            for cycle in (outcomes[position, name] for name in allowed)
        )

    return best(0, prompt_length)


def static_policy(depth: int, top_k: int, total_tokens: int, lookup_first: bool) -> hfas.StaticTreePolicy:
    policy_class = hfas.LookupFirstPolicy if lookup_first else hfas.StaticTreePolicy
    return policy_class(depth=depth, top_k=top_k, total_tokens=total_tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", required=True, help="recording folder")
    parser.add_argument("--profile", required=True, help="HardwareProfile JSON")
    parser.add_argument("--lookup-tokens", type=int, default=0, help="replay the prompt-lookup branch of N tokens")
    parser.add_argument("--static", default="1,8,8", help="depth,top_k,total_tokens of the static tree to compare with")
    parser.add_argument("--lookup-first", action="store_true", help="compare with LookupFirstPolicy of that tree")
    args = parser.parse_args()
    if args.lookup_first and not args.lookup_tokens:
        parser.error("--lookup-first drafts only where the prompt-lookup branch did not match: give --lookup-tokens N")
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    recording, profile = load_recording(args.recording), HardwareProfile.load(args.profile)
    environment = ReplayEnvironment(recording, profile, lookup_tokens=args.lookup_tokens)
    shapes = recorded_shapes(environment)
    depth, top_k, total_tokens = static_shape(parser, args.static, shapes, environment.recording.tree_config.top_k)
    baseline = static_policy(depth, top_k, total_tokens, args.lookup_first)
    static = environment.replay(baseline)
    tokens = sum(c.committed_tokens for c in static.all_cycles)
    depth_one = [name for name in shapes if name.startswith("depth 1,")]
    choices = {
        f"static tree {args.static} every cycle": [shape_name(depth, total_tokens)],
        "plain step or the static tree": [PLAIN_STEP, shape_name(depth, total_tokens)],
        "plain step or any depth-1 tree": [PLAIN_STEP] + depth_one,
        "any recorded shape": list(shapes),
    }
    print(f"{environment.num_prompts} prompts, {tokens} tokens; {baseline!r}: {static.tokens_per_second:.2f} tokens/s")
    print(f"| per-cycle choice, in hindsight | tokens/s | vs {type(baseline).__name__} |")
    print("|---|---|---|")
    per_prompt = [
        (replay_outcomes(environment, p, shapes), environment.num_positions(p), environment.prompt_length(p))
        for p in range(environment.num_prompts)
    ]
    for label, allowed in choices.items():
        seconds = sum(
            least_seconds(outcomes, positions, allowed, profile, length) for outcomes, positions, length in per_prompt
        )
        print(f"| {label} | {tokens / seconds:.2f} | {tokens / seconds / static.tokens_per_second:.3f}x |")


if __name__ == "__main__":
    main()
