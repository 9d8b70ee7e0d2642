"""EAGLE-2 tree expansion: top-k beams per depth by cumulative log-prob, then the best nodes."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch
from transformers.utils import logging

from ..core.tree import DraftTree
from ..drafters.base import DraftContext, Drafter, check_draft_to_target
from ..policies.base import DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo

logger = logging.get_logger(__name__)


@dataclass
class DraftTimes:
    """Wall time spent in the drafter and in the policy while building one tree, and the drafter's
    forward steps (levels: the first step and each expansion)."""

    draft: float = 0.0
    policy: float = 0.0
    levels: int = 0


#: the largest verification budget taken (and then lowered to the tree's node count)
_LARGEST_BUDGET = 1 << 30


def _check_budget(value: object, tree_candidates: int) -> int:
    """``num_tokens_to_verify``'s answer: an int in 0..``tree_candidates`` (larger ones, up to 2**30, are taken as
    the whole tree, as policies rely on)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _LARGEST_BUDGET:
        raise ValueError(
            f"The policy's num_tokens_to_verify returned {value!r}; expected an int in [0, {tree_candidates}] "
            f"(this tree's total_tokens - 1; a larger int, up to 2**30, verifies the whole tree)."
        )
    return value


def fit_largest_bucket(config: TreeConfig, largest_bucket: int, chain_length: int) -> TreeConfig:
    """``config`` with ``total_tokens`` lowered so the tree and a prompt-lookup chain of ``chain_length`` fit the
    static-cache path's largest verification bucket (``config`` itself when they already do)."""
    room = max(1, largest_bucket - chain_length)
    return config if config.total_tokens <= room else replace(config, total_tokens=room)


def best_nodes(tree: DraftTree, budget: int) -> list[int]:
    """The ``budget`` best-scoring non-root nodes, sorted by index (EAGLE-2's rerank).

    Parents score at least as high as their children and sit shallower, so the kept nodes
    and the root form a connected tree.
    """
    ranked = sorted(range(1, len(tree)), key=lambda i: (-tree.scores[i], tree.depths[i], i))
    return sorted(ranked[:budget])


class TreeBuilder:
    """Grows a draft tree level by level, asking the policy after each level.

    Deterministic mode (default) adds the drafter's top-k children of every frontier node,
    keeps the ``top_k`` best-scoring new nodes as the next frontier, and finally keeps the
    best ``num_tokens_to_verify`` nodes (EAGLE-2). Sampled mode (``TreeConfig.sample_drafts``)
    draws ``top_k`` children per expanded node from the draft distribution and only ever keeps
    or drops *whole* sibling groups, chosen without looking at the group's own tokens, which
    keeps recursive rejection sampling exact. So a sampled tree is verified up to
    ``total_tokens`` without asking the policy's ``num_tokens_to_verify``: a budget read from the
    drafted scores would keep or drop a group by its own tokens (a group kept only when its draft
    is confident is accepted more often than the target's distribution allows).
    """

    def __init__(self, drafter: Drafter, policy: DraftPolicy, target_vocab_size: int):
        self.drafter = drafter
        self.policy = policy
        self.target_vocab_size = target_vocab_size
        # the drafter's mapping, checked once per call (its values: one read) before anything is drafted
        check_draft_to_target(drafter, target_vocab_size)
        self.checked_mapping = drafter.draft_to_target
        #: the width of the drafter's rows this call (from its first rows): every later level has the same
        self.draft_vocab_size: int | None = None
        #: whether the policy chooses its own verification budget (not asked of sampled trees: see ``_prune``)
        self.policy_sets_budget = type(policy).num_tokens_to_verify is not DraftPolicy.num_tokens_to_verify

    def build(
        self, context: DraftContext, config: TreeConfig, max_depth: int, times: DraftTimes, lookup_length: int = 0,
        root_token: int | None = None,
    ) -> DraftTree:
        """Draft a tree below the root ``context.input_ids[0, -1]`` (``root_token`` when the caller knows it on the
        host: no read of the device) of depth at most ``max_depth``; ``lookup_length`` (the prompt-lookup chain to
        be grafted) is passed on to the policy."""
        tree = DraftTree.with_root(int(context.input_ids[0, -1]) if root_token is None else root_token)
        max_depth = min(max_depth, config.reachable_depth)
        if max_depth < 1:
            return tree
        context_length = context.input_ids.shape[1]
        start = time.perf_counter()
        rows = self.drafter.begin_tree(context)
        times.levels += 1
        frontier = [0]
        depth = 0
        hook = "begin_tree(context)"
        try:
            while True:
                self._check_rows(rows, hook, len(frontier))
                new_nodes = self._add_children(tree, frontier, rows, config, hook)
                depth += 1
                times.draft += time.perf_counter() - start
                if depth >= max_depth:
                    break
                start = time.perf_counter()
                scores = torch.tensor([tree.scores[i] for i in new_nodes], device="cpu")
                step = DraftStepInfo(depth, context_length, scores, config, lookup_length)
                keep_going = self.policy.continue_drafting(step)
                times.policy += time.perf_counter() - start
                if not isinstance(keep_going, bool):
                    raise ValueError(f"The policy's continue_drafting returned {keep_going!r}; expected a bool.")
                if not keep_going:
                    break
                frontier = self._next_frontier(tree, new_nodes, config, rows.shape[-1])
                if not frontier:
                    break
                start = time.perf_counter()
                rows = self.drafter.expand(tree, frontier)
                hook = f"expand(tree, nodes) for {len(frontier)} nodes"
                times.levels += 1
        finally:
            self.drafter.end_tree()
        return self._prune(tree, config, context_length, times, lookup_length)

    def _check_rows(self, rows: object, hook: str, expected_rows: int) -> None:
        """Refuse rows that break the drafter's contract (``[len(nodes), V]`` log-probs, one row per node asked
        about, the same ``V`` at every level and that of ``draft_to_target``): metadata alone, no read of the
        values. Also checks a ``draft_to_target`` the drafter replaced during the call, once."""
        drafter = self.drafter
        name = type(drafter).__name__
        mapping = drafter.draft_to_target
        if mapping is not self.checked_mapping:
            check_draft_to_target(drafter, self.target_vocab_size)
            self.checked_mapping = mapping
        expected_width = mapping.shape[0] if mapping is not None else self.draft_vocab_size
        shape = list(rows.shape) if isinstance(rows, torch.Tensor) else None
        floating = shape is not None and rows.is_floating_point()
        if (
            floating and len(shape) == 2 and shape[0] == expected_rows and shape[1] > 0
            and expected_width in (None, shape[1])
        ):
            if self.draft_vocab_size is None:
                self.draft_vocab_size = shape[1]
            return
        if shape is None:
            got = f"a {type(rows).__name__}, not a torch.Tensor"
        elif not floating:
            got = f"a {rows.dtype} tensor of shape {shape}"
        else:
            got = f"a tensor of shape {shape}"
        if expected_width is None:
            width, vocab = "V", "V: the drafter's vocabulary size"
        elif mapping is not None:
            width, vocab = str(expected_width), "the drafter's vocabulary: the length of its draft_to_target"
        else:
            width, vocab = str(expected_width), "the drafter's vocabulary, as wide as its first rows of this call"
        raise ValueError(
            f"{name}.{hook} returned {got}; it must return a floating-point torch.Tensor of shape "
            f"[{expected_rows}, {width}] "
            f"({vocab}): "
            "one row of log-probabilities over the drafter's vocabulary per node asked about (begin_tree: one row, "
            "for the root; expand: one per node, in order). Return log_softmax(logits, dim=-1) of shape "
            f"[{expected_rows}, {width}] (e.g. add the batch dimension with rows[None], or drop an extra one)."
        )

    def _add_children(
        self, tree: DraftTree, frontier: list[int], rows: torch.Tensor, config: TreeConfig, hook: str
    ) -> list[int]:
        """Children of every frontier node from ``rows`` (``[len(frontier), draft_vocab]`` log-probs),
        chosen for the whole level at once: one top-k (or one multinomial) and one read to the host."""
        mapping = self.checked_mapping  # the drafter's, as _check_rows checked it for these rows
        if mapping is None and rows.shape[-1] > self.target_vocab_size:
            raise ValueError(
                f"{type(self.drafter).__name__} drafts over {rows.shape[-1]} tokens and the target has "
                f"{self.target_vocab_size}, with no draft_to_target mapping: ids past the target's vocabulary cannot "
                "be verified. Give the drafter the target's vocabulary (or a draft_to_target mapping to it)."
            )
        if config.sample_drafts:
            probs = rows.exp()
            draft_ids = self._draw(probs, self._beams(config, rows.shape[-1]), hook)
            child_log_probs = rows.gather(-1, draft_ids)
            # without a mapping a draft id is the target's id: a narrower drafter proposes the first ids alone
            where = mapping if mapping is not None else slice(0, rows.shape[-1])
            for parent, row in zip(frontier, probs):
                target_probs = torch.zeros(self.target_vocab_size, dtype=row.dtype, device=row.device)
                target_probs[where] = row
                tree.proposal_probs[parent] = target_probs
        else:
            child_log_probs, draft_ids = rows.topk(min(config.top_k, rows.shape[-1]), dim=-1)
        token_ids = mapping[draft_ids] if mapping is not None else draft_ids
        # One read to the host for ids and log-probs together: float64 holds both exactly (ids < 2**53).
        ids_rows, log_prob_rows = torch.stack((token_ids.to(torch.float64), child_log_probs.to(torch.float64))).tolist()
        new_nodes: list[int] = []
        for parent, tokens, log_probs in zip(frontier, ids_rows, log_prob_rows):
            new_nodes += tree.add_children(parent, tokens, log_probs)
        return new_nodes

    def _draw(self, probs: torch.Tensor, beams: int, hook: str) -> torch.Tensor:
        """``beams`` draft ids per row of ``probs``, drawn with replacement; rows torch cannot draw from (NaN, an
        infinite or negative entry, no mass at all: found by torch on its error path, no read added) are refused
        naming the drafter's hook. On a GPU torch may stop at a device-side assert instead."""
        try:
            return torch.multinomial(probs, beams, replacement=True)
        except RuntimeError as error:
            name = type(self.drafter).__name__
            raise ValueError(
                f"{name}.{hook} returned rows a sampled tree cannot draw from ({error}): a row of NaN, +inf or "
                "only -inf log-probabilities. Sampled drafts (TreeConfig.sample_drafts) draw from exp(rows), so each "
                f"row must be finite log-probabilities of some token: return torch.log_softmax(logits, dim=-1) "
                f"from {name}.{hook.split('(')[0]}, with finite logits."
            ) from error

    def _next_frontier(self, tree: DraftTree, new_nodes: list[int], config: TreeConfig, vocab_size: int) -> list[int]:
        ranked = sorted(new_nodes, key=lambda i: -tree.scores[i])[: self._beams(config, vocab_size)]
        if not config.sample_drafts:
            return sorted(ranked)
        room = (config.total_tokens - len(tree)) // self._beams(config, vocab_size)  # whole sibling groups that fit
        return sorted(ranked[: max(room, 0)])

    @staticmethod
    def _beams(config: TreeConfig, vocab_size: int) -> int:
        """Beams per level: ``top_k``, unless it exceeds the draft vocabulary (``top_k=10**6`` would grow
        vocab**depth nodes). Then only the ``total_tokens - 1`` best: beams ranked past that are never
        verified (the rerank keeps at most that many nodes, and every beam ranked above one outranks it
        and its descendants), so the verified tree is the same. Replays record ``top_k <= vocab``, where
        nothing changes. Sampled trees draw this many children per expanded node (a sibling group):
        the count does not depend on the tokens drawn, so rejection sampling stays exact, and a group of
        10**6 would neither be cheap to draw nor fit in ``total_tokens``."""
        if config.top_k <= vocab_size:
            return config.top_k
        return max(1, min(vocab_size, config.total_tokens - 1))

    def _prune(
        self, tree: DraftTree, config: TreeConfig, context_length: int, times: DraftTimes, lookup_length: int
    ) -> DraftTree:
        num_candidates = len(tree) - 1
        if config.sample_drafts:  # whole groups up to the config's budget, which the drafted tokens did not choose
            if self.policy_sets_budget:
                logger.warning_once(
                    f"{type(self.policy).__name__}.num_tokens_to_verify is not asked for sampled trees "
                    "(TreeConfig.sample_drafts): a budget read from the sampled drafts would make sampling inexact. "
                    "Each such tree is verified up to total_tokens; size it in tree_config."
                )
            keep = self._whole_groups(tree, min(num_candidates, config.total_tokens - 1))
            return tree.subtree(keep) if len(keep) < len(tree) else tree
        start = time.perf_counter()
        info = VerifySizeInfo(
            context_length=context_length,
            scores=torch.tensor(tree.scores[1:], device="cpu"),
            depths=torch.tensor(tree.depths[1:], device="cpu"),
            config=config,
            lookup_length=lookup_length,
        )
        requested = self.policy.num_tokens_to_verify(info)
        times.policy += time.perf_counter() - start
        budget = min(_check_budget(requested, config.total_tokens - 1), num_candidates, config.total_tokens - 1)
        keep = [0] + best_nodes(tree, budget)
        if len(keep) == len(tree):
            return tree
        try:
            return tree.subtree(keep)
        except ValueError as error:
            not_log_probs = self._not_log_probs(tree)
            if not_log_probs is None:
                raise
            raise not_log_probs from error

    def _not_log_probs(self, tree: DraftTree) -> ValueError | None:
        """On a rerank that kept a node without its parent (only on that error path), the error naming its usual
        cause: a drafter whose rows are not log-probabilities (logits, probabilities: a child scoring above its
        parent), with the hook that returned them; None when no child scores above its parent."""
        name = type(self.drafter).__name__
        for node in range(1, len(tree)):
            score, parent_score = tree.scores[node], tree.scores[tree.parents[node]]
            if not score <= parent_score:
                hook = "begin_tree" if tree.depths[node] == 1 else "expand"
                return ValueError(
                    f"{name}.{hook} returned rows that are not log-probabilities: a draft token of depth "
                    f"{tree.depths[node]} got {score - parent_score:g} (its cumulative score {score:g} above its "
                    f"parent's {parent_score:g}). A drafter's rows must be log-probabilities over its vocabulary "
                    "(each <= 0, so that a child never scores above its parent once scores are summed log-probs), "
                    f"not logits or probabilities: return torch.log_softmax(logits, dim=-1) from {name}.{hook}."
                )
        return None

    @staticmethod
    def _whole_groups(tree: DraftTree, budget: int) -> list[int]:
        keep = [0]
        parents_in_order = list(dict.fromkeys(tree.parents[1:]))
        for parent in parents_in_order:
            group = tree.children(parent)
            if parent not in keep or len(keep) - 1 + len(group) > budget:
                break
            keep += group
        return sorted(keep)
