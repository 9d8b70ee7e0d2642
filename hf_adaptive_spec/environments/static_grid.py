"""Rank the static trees a recording holds on a hardware profile: which fixed tree this machine wants.

Every ``StaticTreePolicy(depth, top_k, total_tokens)`` that a recording contains is replayed on all
its prompts, with plain one-token steps (depth 0) for reference. Over several recordings every tree is replayed on
all of them: those of one ``top_k`` pooled, and those of several ``top_k`` (of the same prompts) replayed together,
each tree on its ``top_k``'s recording over the positions all of them hold (:func:`rank_over_recordings`).
τ is exact for greedy decoding; tokens/s is modelled from the profile (on the static path a tree costs its padded
bucket's time, so only the largest size of each bucket is worth verifying there). With a prompt-lookup branch of N
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
from .multi import MultiReplayEnvironment
from .recorded import ReplayRecording, check_same_models
from .replay import ReplayEnvironment, ReplayLoop
from .replay_checks import check_measured_sizes


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
    check_measured_sizes(profile, [recording])
    environment = ReplayEnvironment(
        recording, profile, lookup_tokens=lookup_tokens, lookup_ngram_size=lookup_ngram_size
    )
    return rank_trees_in(environment, [recording], profile, lookup_tokens)


def rank_trees_in(
    environment: ReplayLoop, recordings: list[ReplayRecording], profile: HardwareProfile, lookup_tokens: int
) -> list[RankedTree]:
    """Every static tree ``recordings`` hold (and depth 0), each replayed in ``environment``, which replays all of
    them on the same generations, best first."""
    drafted = [shape for recording in recordings for shape in recorded_tree_shapes(recording, profile, lookup_tokens)]
    candidates = [RankedTree(depth, top_k, total, 0.0, 0.0, lookup_tokens)
                  for depth, top_k, total in [(0, recordings[0].tree_config.top_k, 1), *drafted]]
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
    """Every static tree of ``recordings``, each ranked on all of them (:func:`replay_environment_over`), with each
    prompt-lookup branch length of ``lookup_counts`` (0: no branch), best first."""
    recordings = list(recordings)
    groups = recordings_by_top_k(recordings)
    check_measured_sizes(profile, recordings)
    ranked = [
        tree
        for lookup_tokens in dict.fromkeys(lookup_counts)
        for tree in rank_trees_in(replay_environment_over(groups, profile, lookup_tokens, lookup_ngram_size),
                                  groups, profile, lookup_tokens)
    ]
    return best_first(ranked)


def recordings_by_top_k(recordings: Iterable[ReplayRecording]) -> list[ReplayRecording]:
    """One recording per ``top_k``, ascending: recordings of the same ``top_k`` concatenated (their prompts are
    pooled, as shards are), so that no tree is ranked on a part of the data another is not."""
    recordings = list(recordings)
    check_same_models(recordings, "ranked together")
    by_top_k: dict[int, list[ReplayRecording]] = {}
    for recording in recordings:
        by_top_k.setdefault(recording.tree_config.top_k, []).append(recording)
    if not by_top_k:
        raise ValueError("No recording to rank the static trees on: pass at least one.")
    try:
        return [ReplayRecording.concatenate(group) for _, group in sorted(by_top_k.items())]
    except ValueError as error:
        raise ValueError(
            f"Recordings of one top_k are ranked together, as one: {error} Rank recordings of one depth, total_tokens "
            "and --max-new-tokens per top_k, or rank them in separate profiles."
        ) from error


def replay_environment_over(
    groups: list[ReplayRecording], profile: HardwareProfile, lookup_tokens: int = 0, lookup_ngram_size: int = 2
) -> ReplayLoop:
    """Where every tree and policy is replayed on all of ``groups`` (one recording per ``top_k``,
    :func:`recordings_by_top_k`): the recording itself, or with several ``top_k`` the
    :class:`MultiReplayEnvironment` of them, which needs the same prompts recorded for each ``top_k`` and replays
    each tree on its ``top_k``'s recording over the positions all of them hold."""
    if len(groups) == 1:
        return ReplayEnvironment(groups[0], profile, lookup_tokens=lookup_tokens, lookup_ngram_size=lookup_ngram_size)
    try:
        return MultiReplayEnvironment(groups, profile, lookup_tokens=lookup_tokens, lookup_ngram_size=lookup_ngram_size)
    except ValueError as error:
        raise ValueError(
            f"Recordings of several top_k ({[group.tree_config.top_k for group in groups]}) are ranked together only "
            f"on the same prompts, each tree on its top_k's: {error}"
        ) from error
