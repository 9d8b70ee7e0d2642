"""Headroom for an adaptive verify size, measured on a replay recording (modelled time).

    python examples/replay_confidence_gate.py --recording artifacts/replay/sharegpt-d3k8 \
        --profile artifacts/replay/profile.json [--policy artifacts/radar-smollm2-wide] [--lookup-tokens 4]

A hand-set rule, not a learned policy: draft one level, then verify the ``size`` best first
drafts only when the best one has draft probability at least ``threshold``; otherwise verify
none (a plain one-token step). Each rule is compared with the static tree that verifies the
``top_k - 1`` best first drafts, and so is every ``--policy`` given. A learned size policy that
sees the candidates' scores should reach at least the best rule here. With ``--lookup-tokens``
every cycle also verifies the prompt-lookup chain, and each rule is also tried gating only the
cycles where the lookup found no chain (a skip with a chain costs a multi-token forward anyway).
"""

from __future__ import annotations

import argparse

from int_lists import positive_ints

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.policies import VerifySizeInfo
from hf_adaptive_spec.profiling.hardware import HardwareProfile


class ConfidenceGate(hfas.StaticTreePolicy):
    """Depth 1; verify ``size`` candidates when the best first draft's probability reaches ``threshold``, else none
    (with ``only_without_chain``, only when the prompt-lookup branch found no chain)."""

    def __init__(self, top_k: int, size: int, threshold: float, only_without_chain: bool = False):
        super().__init__(depth=1, top_k=top_k, total_tokens=size + 1)
        self.threshold = threshold
        self.only_without_chain = only_without_chain

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        confident = info.scores.max().exp().item() >= self.threshold
        keep = confident or (self.only_without_chain and info.lookup_length > 0)
        return super().num_tokens_to_verify(info) if keep else 0


def probabilities(text: str) -> list[float]:
    """``"0,0.1"`` -> ``[0.0, 0.1]``, an argparse ``type``: a threshold above 1 never verified and one below 0 always
    did, each printed as a rule of its own; a value that is no number stopped in a bare ValueError after the
    recording had loaded."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(0 <= value <= 1 for value in values):
        raise argparse.ArgumentTypeError(f"each is a draft probability, from 0 to 1, comma-separated; got {text!r}")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", required=True, help="recording folder")
    parser.add_argument("--profile", required=True, help="HardwareProfile JSON")
    parser.add_argument("--policy", action="append", default=[], help="a saved policy to compare (repeatable)")
    parser.add_argument("--sizes", type=positive_ints, default="5,7", help="comma-separated verify sizes")
    parser.add_argument("--thresholds", type=probabilities, default="0,0.05,0.1,0.15,0.2,0.3",
                        help="comma-separated probabilities")
    parser.add_argument("--lookup-tokens", type=int, default=0, help="replay the prompt-lookup branch of N tokens")
    args = parser.parse_args()
    sizes, thresholds = args.sizes, args.thresholds
    recording, profile = load_recording(args.recording), HardwareProfile.load(args.profile)
    environment = ReplayEnvironment(recording, profile, lookup_tokens=args.lookup_tokens)
    top_k = environment.recording.tree_config.top_k
    static = environment.replay(hfas.StaticTreePolicy(depth=1, top_k=top_k, total_tokens=top_k))
    print(f"static tree (depth 1, {top_k - 1} candidates verified): τ {static.mean_accepted_tokens:.3f}")
    print("| rule | τ | share of cycles verifying nothing | vs static |")
    print("|---|---|---|---|")
    candidates = [
        (f"size {size}, threshold {t:g}{', no chain' * gate}", ConfidenceGate(top_k, size, t, gate))
        for size in sizes
        for t in thresholds
        for gate in ([False, True] if args.lookup_tokens else [False])
    ]
    candidates += [(path, hfas.AutoDraftPolicy.from_pretrained(path)) for path in args.policy]
    for name, policy in candidates:
        result = environment.replay(policy)
        skipped = sum(cycle.draft_depth == 0 for cycle in result.all_cycles) / len(result.all_cycles)
        speed = result.tokens_per_second / static.tokens_per_second
        print(f"| {name} | {result.mean_accepted_tokens:.3f} | {skipped:.3f} | {speed:.3f}x |")


if __name__ == "__main__":
    main()
