"""Time a draft policy's hooks per cycle, as ``generate`` calls them, on synthetic cycles.

A cycle asks ``tree_config`` once, ``continue_drafting`` after every draft level until the policy
stops (or the tree's depth), then ``num_tokens_to_verify`` once, and ``observe`` with the outcome.
Their sum is the policy's overhead per cycle (the bench's "policy" share, measured live, also
counts the caches the target's forward left cold; this is the hooks alone):

    python examples/policy_hook_time.py --policy artifacts/ltd-smollm2-stage11 --num-threads 2
    python examples/policy_hook_time.py --policy artifacts/radar-smollm2-stage11 --num-threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from hf_adaptive_spec.policies import AutoDraftPolicy
from hf_adaptive_spec.policies.base import CycleFeedback, CycleState, DraftStepInfo, VerifySizeInfo


def synthetic_levels(top_k: int, depth: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Cumulative log-probs of each level's candidates: ``top_k`` at depth 1, ``top_k²`` below."""
    levels, parent = [], torch.zeros(1)
    for _ in range(depth):
        children = parent.repeat_interleave(top_k) - torch.rand(parent.numel() * top_k, generator=generator) * 2
        levels.append(children)
        parent = children.topk(min(top_k, children.numel())).values
    return levels


def one_cycle(policy, state: CycleState, levels: list[torch.Tensor]) -> None:
    config = policy.tree_config(state)
    drafted = []
    for depth, scores in enumerate(levels[: config.depth], 1):
        drafted.append(scores)
        if depth == config.depth or not policy.continue_drafting(
            DraftStepInfo(depth, state.context_length, scores, config)
        ):
            break
    depths = torch.cat([torch.full((s.numel(),), d) for d, s in enumerate(drafted, 1)])
    verified = policy.num_tokens_to_verify(VerifySizeInfo(state.context_length, torch.cat(drafted), depths, config))
    accepted = min(len(drafted), 1)
    policy.observe(CycleFeedback(state.context_length, len(drafted), verified + 1, accepted, 0.0, 0.0, 0.0, accepted))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="a saved policy folder (any kind)")
    parser.add_argument("--num-threads", type=int, default=2)
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--hidden-size", type=int, default=576, help="the target's hidden size (Re-SpS reads its states)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.num_threads)
    policy = AutoDraftPolicy.from_pretrained(args.policy)
    generator = torch.Generator().manual_seed(0)
    features = {layer: torch.randn(args.hidden_size, generator=generator) for layer in policy.feature_layers}
    tree = policy.tree_config(CycleState(200, features))
    cycles = [synthetic_levels(tree.top_k, tree.depth, generator) for _ in range(args.cycles)]
    timings = []
    with torch.no_grad():  # as in generate
        for _ in range(args.repeats + 1):  # the first pass warms up
            start = time.perf_counter()
            for number, levels in enumerate(cycles):
                one_cycle(policy, CycleState(200 + number, features), levels)
            timings.append((time.perf_counter() - start) / len(cycles) * 1e6)
    print(f"{type(policy).__name__} ({args.policy}): {statistics.median(timings[1:]):.0f} us per cycle "
          f"(median of {args.repeats}; "
          f"each {', '.join(f'{t:.0f}' for t in timings[1:])})")


if __name__ == "__main__":
    main()
