"""Rank the static trees a recording holds on a hardware profile: which fixed tree this machine wants.

Every ``StaticTreePolicy(depth, top_k, total_tokens)`` that a recording contains is replayed on all
its prompts, with plain one-token steps (depth 0) for reference. τ is exact for greedy decoding;
tokens/s is modelled from the profile (on the static path a tree costs its padded bucket's time,
so only the largest size of each bucket is worth verifying there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from ..core.tree import full_tree_size
from ..policies.static import StaticTreePolicy
from ..profiling.hardware import HardwareProfile
from .recording import ReplayRecording
from .replay import ReplayEnvironment


@dataclass(frozen=True)
class RankedTree:
    """One static tree's replayed τ and modelled tokens/s (depth 0: plain one-token steps)."""

    depth: int
    top_k: int
    total_tokens: int
    tau: float
    tokens_per_second: float

    def policy(self) -> StaticTreePolicy:
        return StaticTreePolicy(depth=self.depth, top_k=self.top_k, total_tokens=self.total_tokens)

    def to_dict(self) -> dict:
        return asdict(self)


def candidate_sizes(profile: HardwareProfile, largest: int) -> list[int]:
    """The total_tokens worth replaying: every size up to ``largest``, or on a bucketed profile the
    buckets below it and ``largest`` itself (a smaller tree in the same bucket costs the same)."""
    if not profile.buckets:
        return list(range(2, largest + 1))
    return sorted({b for b in profile.buckets if 2 <= b < largest} | {min(largest, profile.buckets[-1])})


def recorded_tree_shapes(recording: ReplayRecording, profile: HardwareProfile) -> list[tuple[int, int, int]]:
    """``(depth, top_k, total_tokens)`` of every static tree ``recording`` holds that is worth replaying
    on ``profile`` (plain steps not included), each tree once: a tree of ``total_tokens`` nodes is at most
    ``total_tokens - 1`` deep, so a deeper ``depth`` would list the same tree again under another name."""
    recorded = recording.tree_config
    return [
        (depth, recorded.top_k, total)
        for depth in range(1, recorded.depth + 1)
        for total in candidate_sizes(profile, min(recorded.total_tokens, full_tree_size(depth, recorded.top_k)))
        if depth <= total - 1
    ]


def rank_static_trees(
    recording: ReplayRecording, profile: HardwareProfile, lookup_tokens: int = 0, lookup_ngram_size: int = 2
) -> list[RankedTree]:
    """Every static tree ``recording`` holds (and plain steps), replayed with ``profile``'s costs, best first."""
    environment = ReplayEnvironment(recording, profile, lookup_tokens=lookup_tokens, lookup_ngram_size=lookup_ngram_size)
    shapes = [(0, recording.tree_config.top_k, 1)] + recorded_tree_shapes(recording, profile)
    ranked = []
    for depth, top_k, total in shapes:
        result = environment.replay(StaticTreePolicy(depth=depth, top_k=top_k, total_tokens=total))
        ranked.append(RankedTree(depth, top_k, total, result.mean_accepted_tokens, result.tokens_per_second))
    return best_first(ranked)


def best_first(ranked: list[RankedTree]) -> list[RankedTree]:
    """Fastest first; among equally fast trees the smallest and shallowest (the cheaper tree to draft)."""
    return sorted(ranked, key=lambda tree: (-tree.tokens_per_second, tree.total_tokens, tree.depth))


def rank_over_recordings(
    recordings: Iterable[ReplayRecording], profile: HardwareProfile, lookup_tokens: int = 0, lookup_ngram_size: int = 2
) -> list[RankedTree]:
    """:func:`rank_static_trees` over several recordings (e.g. one per ``top_k``), merged best first."""
    ranked = [
        tree
        for recording in recordings
        for tree in rank_static_trees(recording, profile, lookup_tokens, lookup_ngram_size)
    ]
    return best_first(ranked)
