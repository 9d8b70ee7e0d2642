"""Rank the static trees a recording holds on a hardware profile: which fixed tree this machine wants.

Every ``StaticTreePolicy(depth, top_k, total_tokens)`` that a recording contains is replayed on all
its prompts, with plain one-token steps (depth 0) for reference. τ is exact for greedy decoding;
tokens/s is modelled from the profile (on the static path a tree costs its padded bucket's time,
so only the largest size of each bucket is worth verifying there). With a prompt-lookup branch of N
tokens (``generate(..., prompt_lookup_num_tokens=N)``) grafted onto every tree, depth 0 is the branch
alone: the target verifies the lookup chain and the drafter drafts nothing; and each drafted tree is
ranked a second time as :class:`~hf_adaptive_spec.policies.LookupFirstPolicy`, drafted only in the
cycles where the branch did not match.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace

from ..core.settings import distinct_ints_from_text
from ..core.tree import full_tree_size
from ..policies.base import TreeConfig
from ..policies.static import StaticTreePolicy, static_tree_policy
from ..profiling.hardware import HardwareProfile
from .recording import ReplayRecording
from .replay import ReplayEnvironment


@dataclass(frozen=True)
class RankedTree:
    """One static tree's replayed τ and modelled tokens/s with a prompt-lookup branch of ``lookup_tokens``
    (depth 0: plain one-token steps, or the lookup branch alone); ``lookup_first``: drafted only where the
    branch did not match (:class:`LookupFirstPolicy`)."""

    depth: int
    top_k: int
    total_tokens: int
    tau: float
    tokens_per_second: float
    lookup_tokens: int = 0
    lookup_first: bool = False

    @property
    def is_plain(self) -> bool:
        """One-token steps: nothing drafted and no lookup branch."""
        return self.depth == 0 and self.lookup_tokens == 0

    def policy(self) -> StaticTreePolicy:
        return static_tree_policy(TreeConfig(self.depth, self.top_k, self.total_tokens), self.lookup_first)

    def to_dict(self) -> dict:
        return asdict(self)


def lookup_counts_from_text(text: str) -> tuple[int, ...]:
    """``"0,1,4"`` as distinct ascending prompt-lookup branch lengths (0: no branch); a ``ValueError`` names
    what is wrong."""
    counts = distinct_ints_from_text(text)
    if counts is None or counts[0] < 0:
        raise ValueError(f"expected branch lengths >= 0 separated by commas (0: no branch), e.g. 0,1,4; got {text!r}")
    return counts


def candidate_sizes(profile: HardwareProfile, largest: int, lookup_tokens: int = 0) -> list[int]:
    """The total_tokens worth replaying: every size up to ``largest``, or on a bucketed profile the
    buckets below it and ``largest`` itself (a smaller tree in the same bucket costs the same); with a
    lookup branch of ``lookup_tokens`` also each bucket less the branch (the tree that fills the bucket
    when the branch is grafted)."""
    if not profile.buckets:
        return list(range(2, largest + 1))
    fills = {b - shift for b in profile.buckets for shift in {0, lookup_tokens}}
    return sorted({size for size in fills if 2 <= size < largest} | {min(largest, profile.buckets[-1])})


def recorded_tree_shapes(
    recording: ReplayRecording, profile: HardwareProfile, lookup_tokens: int = 0
) -> list[tuple[int, int, int]]:
    """``(depth, top_k, total_tokens)`` of every static tree ``recording`` holds that is worth replaying
    on ``profile`` (plain steps not included), each tree once: a tree deeper than it can reach
    (:attr:`TreeConfig.reachable_depth`) would list a shallower tree again under another name."""
    recorded = recording.tree_config
    return [
        (depth, recorded.top_k, total)
        for depth in range(1, recorded.depth + 1)
        for total in candidate_sizes(
            profile, min(recorded.total_tokens, full_tree_size(depth, recorded.top_k)), lookup_tokens
        )
        if TreeConfig(depth, recorded.top_k, total).reachable_depth == depth
    ]


def rank_static_trees(
    recording: ReplayRecording, profile: HardwareProfile, lookup_tokens: int = 0, lookup_ngram_size: int = 2
) -> list[RankedTree]:
    """Every static tree ``recording`` holds (and depth 0: plain steps, or with ``lookup_tokens`` the lookup
    branch alone), each with the prompt-lookup branch of ``lookup_tokens``, replayed with ``profile``'s costs,
    best first."""
    environment = ReplayEnvironment(
        recording, profile, lookup_tokens=lookup_tokens, lookup_ngram_size=lookup_ngram_size
    )
    drafted = recorded_tree_shapes(recording, profile, lookup_tokens)
    candidates = [RankedTree(depth, top_k, total, 0.0, 0.0, lookup_tokens)
                  for depth, top_k, total in [(0, recording.tree_config.top_k, 1), *drafted]]
    if lookup_tokens:
        candidates += [replace(tree, lookup_first=True) for tree in candidates if tree.depth]
    ranked = []
    for tree in candidates:
        result = environment.replay(tree.policy())
        ranked.append(replace(tree, tau=result.mean_accepted_tokens, tokens_per_second=result.tokens_per_second))
    return best_first(ranked)


def best_first(ranked: list[RankedTree]) -> list[RankedTree]:
    """Fastest first; among equally fast trees the smallest and shallowest with the shortest lookup branch
    (the cheaper tree to draft)."""
    return sorted(ranked, key=lambda tree: (-tree.tokens_per_second, tree.total_tokens, tree.depth, tree.lookup_tokens,
                                            tree.lookup_first))


def rank_over_recordings(
    recordings: Iterable[ReplayRecording],
    profile: HardwareProfile,
    lookup_counts: Sequence[int] = (0,),
    lookup_ngram_size: int = 2,
) -> list[RankedTree]:
    """:func:`rank_static_trees` over several recordings (e.g. one per ``top_k``) and each prompt-lookup branch
    length of ``lookup_counts`` (0: no branch), merged best first."""
    recordings = list(recordings)
    ranked = [
        tree
        for lookup_tokens in dict.fromkeys(lookup_counts)
        for recording in recordings
        for tree in rank_static_trees(recording, profile, lookup_tokens, lookup_ngram_size)
    ]
    return best_first(ranked)
