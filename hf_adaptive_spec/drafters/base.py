"""The drafter interface: how the engine asks for draft tokens, one tree level at a time."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache, PreTrainedModel

from ..core.tree import DraftTree


@dataclass(frozen=True)
class DraftContext:
    """The committed sequence at the start of a cycle.

    Args:
        input_ids: ``[1, T]`` committed tokens; the last one is the tree root, which the
            target has not processed yet.
        new_features: target hidden states the drafter asked for (``Drafter.feature_layers``,
            transformers' ``hidden_states`` numbering), each ``[1, m, hidden]``, for the ``m``
            tokens ``input_ids[:, T-1-m : T-1]`` the target processed since the previous cycle
            (the whole prompt after prefill, or its tokens after a pre-filled cache's: see
            :meth:`Drafter.continue_after`; then the accepted path of each verification).
        target_cache: the engine's KV cache, passed only to drafters that declare
            :attr:`Drafter.cache_sharing` (they write the draft nodes' K/V into it).
    """

    input_ids: torch.LongTensor
    new_features: dict[int, torch.Tensor] = field(default_factory=dict)
    target_cache: DynamicCache | None = None


@dataclass(frozen=True)
class DraftOutcome:
    """What verification kept of one cycle's draft, given to :meth:`Drafter.observe` after the cycle.

    Args:
        tree: the verified tree (the draft pruned to the verified nodes, plus any prompt-lookup chain).
        accepted_path: node ids of ``tree`` from the root to the last accepted node.
        committed_tokens: the tokens the cycle appended to the output after the root: the accepted
            nodes' tokens, then the target's own next token (``len(accepted_path)`` tokens; fewer
            when a stopping criterion ends the output inside them, the path cut to match).
        target_features: the target hidden states the drafter asked for (``Drafter.feature_layers``)
            at the root and each accepted node, each ``[1, len(accepted_path), hidden]``: the states
            from which the target chose ``committed_tokens``.
        drafter_nodes: the nodes of ``tree`` the drafter proposed are those numbered below it; the
            prompt-lookup chain's are numbered after them (None: every node is the drafter's).
    """

    tree: DraftTree
    accepted_path: list[int]
    committed_tokens: list[int]
    target_features: dict[int, torch.Tensor] = field(default_factory=dict)
    drafter_nodes: int | None = None


class SharedCacheVerification(ABC):
    """A self-speculative drafter's way to verify: it runs the target's own first :attr:`layers`
    layers and writes the draft nodes' K/V into those layers of the engine's cache
    (``DraftContext.target_cache``); the engine then verifies each tree through :meth:`verify`,
    which reuses them, instead of one full target forward. Declared by :attr:`Drafter.cache_sharing`.

    The engine verifies through it on the dynamic-cache path only, without the prompt-lookup
    branch (the drafter's cache holds no lookup nodes) and without hidden states of the shared
    layers (they are not computed for every tree node); each is refused with a clear error. On
    the static-cache path the drafter drafts in a cache of its own instead (after
    :meth:`Drafter.use_static_shapes`), unless sharing is :attr:`required`.
    """

    #: how many of the target's first layers drafting and verification share.
    layers: int
    #: True when the user asked for sharing explicitly: the static-cache path, which cannot share,
    #: then refuses the drafter instead of drafting in a cache of the drafter's own.
    required: bool = False
    #: how a user turns sharing off, for the engine's refusals (the drafter's own argument)
    how_to_disable: str = "disable the drafter's cache sharing"

    @abstractmethod
    def verify(self, target: PreTrainedModel, cache: DynamicCache, tree: DraftTree, past_length: int) -> torch.Tensor:
        """Verify ``tree`` (the pruned draft tree) through ``target``, reusing the drafted K/V.

        Must leave every layer of ``cache`` with ``past_length`` committed entries followed by one
        entry per node of ``tree``, in node order, and return the target's final-norm output
        ``[len(tree), hidden]`` for the nodes.
        """


def vocab_mapping_problem(ids: object, target_vocab: int, draft_vocab: int | None = None) -> str | None:
    """What keeps ``ids`` from mapping a draft vocabulary one-to-one into a target vocabulary of ``target_vocab``
    tokens (a 1-D integer tensor of distinct ids in ``0..target_vocab - 1``, of ``draft_vocab`` entries when given),
    or None when it does. Reads the tensor's values: one read to the host, so call it once per mapping, not per
    cycle."""
    if not isinstance(ids, torch.Tensor):
        return f"a {type(ids).__name__}, not a torch tensor"
    if ids.ndim != 1:
        return f"of shape {list(ids.shape)}, not 1-D"
    if ids.dtype not in (torch.int64, torch.int32):
        return f"of dtype {ids.dtype}, not an integer one (torch.long)"
    if draft_vocab is not None and ids.shape[0] != draft_vocab:
        return f"{ids.shape[0]} ids for a draft vocabulary of {draft_vocab} tokens"
    if ids.shape[0] == 0:
        return "empty"
    ordered = ids.sort().values
    repeated = (ordered[1:] == ordered[:-1]).any()
    low, high, twice = torch.stack((ordered[0].long(), ordered[-1].long(), repeated.long())).tolist()
    if low < 0 or high >= target_vocab:
        return f"of ids in {low}..{high}, outside 0..{target_vocab - 1}"
    if twice:
        repeats = int((ordered[1:] == ordered[:-1]).sum())
        return f"not one-to-one: {repeats} target id(s) appear more than once"
    return None


def check_draft_to_target(drafter: Drafter, target_vocab: int) -> None:
    """Refuse ``drafter.draft_to_target`` unless it is None or maps the drafter's vocabulary one-to-one into the
    target's (:func:`vocab_mapping_problem`): a target id given to two draft tokens would get their summed mass when a
    sampled tree draws from the drafter, and verification would compare the target with another distribution."""
    mapping = drafter.draft_to_target
    if mapping is None:
        return
    problem = vocab_mapping_problem(mapping, target_vocab)
    if problem is not None:
        name = type(drafter).__name__
        raise ValueError(
            f"{name}.draft_to_target is {problem}. It must be a 1-D integer tensor (torch.long) of the drafter's "
            f"vocabulary size, holding for each draft token its target id, distinct and in 0..{target_vocab - 1} "
            "(one-to-one: a repeated target id would sum the probabilities of its draft tokens, and sampling would "
            f"draw from another distribution than the target's). Fix the mapping {name} sets (e.g. "
            "torch.tensor(ids, dtype=torch.long) of distinct target ids), or set it to None when the drafter's "
            "vocabulary is the target's."
        )


class Drafter(ABC):
    """Proposes draft trees for the speculative engine.

    The engine calls, per ``generate``: :meth:`bind` once; then per cycle :meth:`begin_tree`,
    zero or more :meth:`expand` (one per extra tree level, so a policy can stop after any
    level), :meth:`end_tree`, and after verification :meth:`observe` with the outcome. The
    drafter keeps its own state (e.g. a KV cache of the committed prefix) across cycles.
    Log-probs are over the drafter's vocabulary; :attr:`draft_to_target` maps it to target
    token ids when it is a reduced one.
    """

    #: target hidden states (``hidden_states`` indices) to receive in :class:`DraftContext`.
    feature_layers: tuple[int, ...] = ()
    #: ``[draft_vocab]`` target id of each draft token (a 1-D integer tensor of distinct ids in
    #: ``0..target_vocab - 1``: one-to-one), or None when the vocabularies are equal.
    draft_to_target: torch.LongTensor | None = None

    @abstractmethod
    def bind(self, target: PreTrainedModel) -> None:
        """Check compatibility with ``target`` (raise a clear error if not) and reset all state."""

    @abstractmethod
    def begin_tree(self, context: DraftContext) -> torch.Tensor:
        """Absorb the new committed tokens; return ``[1, V]`` log-probs for the root's children."""

    @abstractmethod
    def expand(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        """Return ``[len(nodes), V]`` log-probs for the children of ``nodes``.

        ``nodes`` all sit at the tree's deepest level; their ancestors were passed to earlier
        :meth:`expand` calls of this cycle (or are the root).
        """

    def end_tree(self) -> None:  # noqa: B027 (an optional hook)
        """Forget this cycle's tree (the committed prefix stays)."""

    def use_static_shapes(self, max_length: int, compile_options: dict | None) -> None:  # noqa: B027 (an optional hook)
        """Called after :meth:`bind` when the engine verifies on the static-cache path.

        ``max_length`` is the longest sequence of the call; ``compile_options`` are the
        ``torch.compile`` kwargs of the call, or None when it runs uncompiled. A drafter may move
        its own forwards to fixed shapes here (EAGLE-3 does); the default keeps them as they are.
        """

    def weights_changed(self) -> None:  # noqa: B027 (an optional hook)
        """Call after writing to the drafter's weights in a way their tensors' versions do not show (through
        ``.data``, or to tensors made under ``torch.inference_mode``): a drafter that keeps graphs holding its
        weights as constants (inductor's freezing) rebuilds them at its next call. Writes that bump a version
        (optimizer steps, ``copy_``, ``load_state_dict``) are seen without it. The default keeps nothing."""

    def continue_after(self, cached_length: int) -> None:
        """Called after :meth:`bind` (and :meth:`use_static_shapes`) when the call continues from a cache that
        already holds the prompt's first ``cached_length`` tokens: the target runs only the tokens after them,
        so the first :attr:`DraftContext.new_features` start at token ``cached_length``, not 0.

        The default serves drafters that read no target features (they see every token in ``input_ids``) and
        refuses the others, which would otherwise misalign features and tokens: a drafter that reads features
        overrides it (EAGLE-3 drafts from the features it gets, as if the prompt began there).
        """
        if self.feature_layers:
            raise ValueError(
                f"{type(self).__name__} reads the target's hidden states of every prompt token, and this call "
                f"continues from a cache holding {cached_length} tokens, whose hidden states are not computed again: "
                "pass a fresh cache (or none), or give the drafter a continue_after that drafts from the tokens "
                "after them."
            )

    @property
    def compile_time(self) -> float:
        """Seconds this ``generate`` call spent compiling the drafter's graphs (reset by :meth:`bind`)."""
        return 0.0

    def weights_digest(self) -> str | None:
        """A digest of the weights that make this drafter's drafts (:func:`~hf_adaptive_spec.core.drafter_identity.
        weights_digest`), by which a learned policy recognises the drafter it was trained with; None (the
        default) for a drafter that cannot be recognised so."""
        return None

    def observe(self, outcome: DraftOutcome) -> None:  # noqa: B027 (an optional hook)
        """Feedback after each cycle that drafted: what the target kept of the draft (e.g. for a
        drafter that learns online). The default ignores it."""

    @property
    def cache_sharing(self) -> SharedCacheVerification | None:
        """How this drafter verifies through the cache it drafted in, or None (the default): the
        target verifies each tree in one forward of its own."""
        return None
