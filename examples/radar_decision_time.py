"""Time one RADAR decision as ``generate`` takes it, against the network's ``forward`` for one step.

``RadarPolicy.continue_drafting`` runs after every draft step, so its cost is policy overhead per
cycle. It runs the LSTM cell written out; ``forward`` (``nn.LSTM``, used in training) gives the same
decisions, checked here on random beam scores before timing:

    python examples/radar_decision_time.py --policy artifacts/radar-smollm2-compiled --num-threads 2
"""

from __future__ import annotations

import argparse
import time

import torch

from hf_adaptive_spec.policies.base import DraftStepInfo
from hf_adaptive_spec.policies.radar import CONTINUE, RadarPolicy, beam_scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--num-threads", type=int, default=2)
    parser.add_argument("--cycles", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.num_threads)
    policy = RadarPolicy.from_pretrained(args.policy)
    tree, state = policy.tree, {}

    @torch.no_grad()
    def forward_step(step: DraftStepInfo) -> bool:
        scores = beam_scores(step.step_scores, tree.top_k)
        logits, state["hidden"] = policy(scores[None, None], state.get("hidden"), first_decision=step.depth - 1)
        return int(policy.decide(logits)[0, 0]) == CONTINUE

    def cycle(decide, steps) -> list[bool]:
        state.clear()
        policy.tree_config(None)
        return [decide(step) for step in steps]

    def random_cycle(spread: float) -> list[DraftStepInfo]:
        return [DraftStepInfo(d, 100, -torch.rand(4 * tree.top_k) * spread, tree) for d in range(1, tree.depth)]

    for trial in range(200):
        steps = random_cycle(trial / 20)
        if cycle(forward_step, steps) != cycle(policy.continue_drafting, steps):
            raise SystemExit(f"decisions differ on trial {trial}")
    steps = random_cycle(3.0)
    for _ in range(5):
        timings = {}
        for name, decide in (
            ("forward (nn.LSTM)", forward_step), ("continue_drafting (cell)", policy.continue_drafting)
        ):
            start = time.perf_counter()
            for _ in range(args.cycles):
                cycle(decide, steps)
            timings[name] = (time.perf_counter() - start) / (args.cycles * len(steps)) * 1e6
        print("  ".join(f"{name}: {us:.0f} us per decision" for name, us in timings.items()), flush=True)


if __name__ == "__main__":
    main()
