"""The policy interface: how the engine asks how deep to draft and how much to verify.

A policy is a small object answering four questions per speculation cycle, in the spirit of
transformers' ``LogitsProcessor``. It never sees the drafter, only numbers:

1. :meth:`DraftPolicy.tree_config` at cycle start: depth limit, beam width and tree size;
2. :meth:`DraftPolicy.continue_drafting` after each draft step: go one level deeper or stop;
3. :meth:`DraftPolicy.num_tokens_to_verify` after drafting: how many candidates to verify;
4. :meth:`DraftPolicy.observe` after verification: feedback for online learning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from ..core.cost_curve import CostCurve
from ..core.drafter_identity import DrafterIdentity
from ..core.values import check_flag, check_number


@dataclass(frozen=True)
class TreeConfig:
    """Shape of one cycle's draft tree (EAGLE-2/3 terms).

    Args:
        depth: maximum number of draft steps (tree depth below the root). ``0`` makes the cycle a
            plain decoding step: nothing is drafted (no drafter cost) and the target verifies the
            root alone, so a policy can fall back to stock decoding where speculation does not pay.
        top_k: children proposed per expanded node, and beams expanded per depth.
        total_tokens: tokens sent to verification, *including* the root (EAGLE's ``total_token``).
        sample_drafts: draw children by sampling the drafter's distribution instead of taking
            its top-k. Both are lossless; sampled trees keep whole sibling groups, up to ``total_tokens``
            (the policy's ``num_tokens_to_verify`` is not asked: its budget would read the sampled tokens).
    """

    depth: int
    top_k: int
    total_tokens: int
    sample_drafts: bool = False

    def __post_init__(self) -> None:
        for name, low in (("depth", 0), ("top_k", 1), ("total_tokens", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"TreeConfig.{name} must be an int >= {low}, got {value!r}.")
        check_flag("TreeConfig", "sample_drafts", self.sample_drafts)

    def plain_step(self) -> TreeConfig:
        """This tree with nothing drafted (``depth=0``, ``top_k`` kept): the cycle verifies the root and the
        prompt-lookup chain it grafts, if any (``generate(..., prompt_lookup_num_tokens=N)``). ``sample_drafts`` is
        dropped: the engine grafts no chain onto a sampled tree, which would make the cycle a one-token step."""
        return TreeConfig(depth=0, top_k=self.top_k, total_tokens=1)

    def lookup_first(self, state: CycleState) -> TreeConfig:
        """This tree, or :meth:`plain_step` where the prompt-lookup branch matched (``state.lookup_length > 0``): the
        rule of a lookup-first policy, which verifies a matched chain alone and leaves the drafter the other cycles."""
        return self.plain_step() if state.lookup_length else self

    @property
    def reachable_depth(self) -> int:
        """The deepest this tree can draft: a tree of ``total_tokens`` nodes (root included) is at most
        ``total_tokens - 1`` deep, so a larger ``depth`` drafts the shallower tree."""
        return min(self.depth, self.total_tokens - 1)


def policy_tree(owner: str, **fields: object) -> TreeConfig:
    """``TreeConfig(**fields)`` for policy ``owner``'s arguments: a refusal names the policy and its argument, not
    the dataclass the user never wrote."""
    try:
        return TreeConfig(**fields)
    except ValueError as error:
        raise ValueError(f"{owner}: {str(error).removeprefix('TreeConfig.').removeprefix('TreeConfig: ')}") from None


def check_tree(owner: str, name: str, tree: object) -> TreeConfig:
    """``tree``, policy ``owner``'s tree setting ``name`` (``policy.config``, ``policy.tree``, an action of a grid),
    refused unless a :class:`TreeConfig` (a string or a tuple set in its place would fail inside ``generate`` as a
    bare ``AttributeError``)."""
    if not isinstance(tree, TreeConfig):
        raise ValueError(
            f"{owner}.{name} must be a TreeConfig, got {tree!r}: set "
            f"policy.{name} = TreeConfig(depth=..., top_k=..., total_tokens=...)."
        )
    return tree


def check_top_k_tree(owner: str, name: str, tree: object) -> TreeConfig:
    """:func:`check_tree` for a learned policy's tree, also refused when it samples its drafts
    (``TreeConfig.sample_drafts``): the policy was trained on replayed top-k trees (a replay records no sampled one),
    decides what a sampled tree does not ask (LTD's verification size, RADAR's skip) and its ``config.json`` keeps
    no ``sample_drafts``, so the folder ``save_pretrained`` writes would draft top-k trees."""
    tree = check_tree(owner, name, tree)
    if tree.sample_drafts:
        raise ValueError(
            f"{owner} decides for top-k trees, as it was trained on replayed ones, and saves no sample_drafts: its "
            f"{name} {tree} samples its drafts. Give it TreeConfig(depth={tree.depth}, top_k={tree.top_k}, "
            f"total_tokens={tree.total_tokens}) (sample_drafts=False); StaticTreePolicy(..., sample_drafts=True) "
            "drafts sampled trees."
        )
    return tree


class TreeSetting:
    """A policy's tree field (``policy.depth``, ``top_k``, ``total_tokens``, ``sample_drafts``) read from the
    :class:`TreeConfig` it drafts with (the attribute ``holder``) and written to it: setting one gives the policy a
    new tree, checked as every tree is and by the policy's :meth:`~DraftPolicy.check_settings` (a tree its network
    does not read is refused, the old one kept), instead of an attribute nothing reads."""

    def __init__(self, holder: str = "config"):
        self.holder = holder

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, policy: object, owner: type | None = None):
        return self if policy is None else getattr(getattr(policy, self.holder), self.name)

    def __set__(self, policy: DraftPolicy, value: object) -> None:
        before = getattr(policy, self.holder)
        setattr(policy, self.holder, policy_tree(type(policy).__name__, **{**asdict(before), self.name: value}))
        try:
            policy.check_settings()
        except ValueError:
            setattr(policy, self.holder, before)
            raise


@dataclass(frozen=True)
class CycleState:
    """What a policy sees at cycle start.

    ``features`` maps each hidden-state index the policy asked for (``feature_layers``) to the
    target's hidden state at the last committed position, shape ``[hidden]``. ``lookup_length``: tokens of
    the prompt-lookup branch (``prompt_lookup_num_tokens``) this cycle will graft, known before the tree is
    chosen; 0 without the branch or without a match (and dropped if the policy asks for sampled drafts).
    """

    context_length: int
    features: dict[int, torch.Tensor] = field(default_factory=dict)
    lookup_length: int = 0


@dataclass(frozen=True)
class DraftStepInfo:
    """What a policy sees after a draft step.

    Args:
        depth: draft steps done so far (1 after the root's children were proposed).
        context_length: committed tokens (prompt + generated).
        step_scores: cumulative draft log-probs of the candidates this step produced, ``[n]``.
        config: the cycle's tree configuration.
        lookup_length: tokens of the prompt-lookup branch (``prompt_lookup_num_tokens``) that this
            cycle grafts onto the tree after drafting; 0 without the branch or without a match.
    """

    depth: int
    context_length: int
    step_scores: torch.Tensor
    config: TreeConfig
    lookup_length: int = 0


@dataclass(frozen=True)
class VerifySizeInfo:
    """What a policy sees before verification: every drafted candidate (root excluded), and the
    length of the prompt-lookup chain grafted after pruning (as in :class:`DraftStepInfo`)."""

    context_length: int
    scores: torch.Tensor  # [n] cumulative draft log-probs
    depths: torch.Tensor  # [n]
    config: TreeConfig
    lookup_length: int = 0


@dataclass(frozen=True)
class CycleFeedback:
    """The outcome of one cycle, for policies that learn online."""

    context_length: int
    draft_depth: int
    verified_tokens: int  # tree size sent to the target, root included
    accepted_length: int  # drafted tokens accepted (the bonus token not counted)
    draft_time: float
    verify_time: float
    policy_time: float
    #: of ``accepted_length``, the tokens the drafter proposed (the accepted path's prefix of its nodes):
    #: fewer only where the prompt-lookup branch's chain carried the path past them
    drafter_accepted_length: int
    #: tokens the cycle added to the generation (accepted drafts and the bonus token, none past an
    #: end-of-sequence token or the length cap: what ``generate`` returns); None: ``accepted_length + 1``
    committed_tokens: int | None = None

    @property
    def tokens_added(self) -> int:
        """What the cycle added to the generation (``committed_tokens``, else ``accepted_length + 1``): the
        tokens a throughput reward counts."""
        return self.accepted_length + 1 if self.committed_tokens is None else self.committed_tokens


_NO_TREE_CONFIG = (
    "{name} must define tree_config(self, state) -> TreeConfig, the one hook every DraftPolicy needs: it returns "
    "the tree to draft each cycle, e.g. TreeConfig(depth=3, top_k=4, total_tokens=16) (depth=0: a plain step). Add "
    "it to {name} (or use StaticTreePolicy(depth, top_k, total_tokens) for a fixed tree)."
)


def check_tree_config_defined(policy: DraftPolicy) -> None:
    """Refuse a policy whose class does not define :meth:`DraftPolicy.tree_config` (when ``generate`` starts, before
    the prompt is processed), naming the class and the hook."""
    if getattr(type(policy), "tree_config", None) is DraftPolicy.tree_config:
        raise NotImplementedError(_NO_TREE_CONFIG.format(name=type(policy).__name__))


class DraftPolicy:
    """Base class: subclass, define :meth:`tree_config` (required: the tree to draft each cycle) and override the
    other hooks you need.

    The other hooks have defaults: draft to ``config.depth``, verify ``config.total_tokens - 1`` candidates and
    ignore feedback. Set ``feature_layers`` to receive target hidden states (transformers'
    ``hidden_states`` numbering) in :class:`CycleState`. A policy trained on measured costs sets
    ``trained_on``: the engine reports a call on another cost curve
    (``out.speculation.policy_cost_curve_mismatch``); one trained on a drafter's recorded acceptance sets
    ``trained_for_drafter``: the engine reports a call with another drafter
    (``out.speculation.policy_drafter_mismatch``); one trained on replayed trees that carried the prompt-lookup
    branch (or none) sets ``trained_with_lookup_tokens`` (and the branch's ``trained_with_lookup_ngram_size``): the
    engine reports a call with another branch (``out.speculation.policy_lookup_mismatch``).
    """

    feature_layers: tuple[int, ...] = ()
    #: the cost curve the policy was trained on (the training profile's
    #: :meth:`~hf_adaptive_spec.profiling.HardwareProfile.cost_curve`; ``{"device", "dtype", "path"}`` in
    #: ``config.json``; None: not trained on costs).
    trained_on: CostCurve | None = None
    #: the drafter whose recorded acceptance it was trained on (``{"name", "weights"}`` in ``config.json``, from the
    #: training profile; None: not trained on a drafter's acceptance, or not recorded).
    trained_for_drafter: DrafterIdentity | None = None
    #: the prompt-lookup branch's length it was trained with (0: none; None: not recorded).
    trained_with_lookup_tokens: int | None = None
    #: the longest n-gram that branch matched in training (``max_matching_ngram_size``; None: not recorded).
    trained_with_lookup_ngram_size: int | None = None

    @property
    def learned(self) -> bool:
        """Whether the policy's choices were learned (a network, retrained for another curve, drafter or branch), as
        against settings chosen for them (a tree, a heuristic's threshold: chosen again): what the mismatch reports
        advise. By default, whether the policy is a torch module."""
        return isinstance(self, torch.nn.Module)

    def check_settings(self) -> None:
        """Refuse a setting this policy cannot run with, whether given to its constructor or set since
        (``policy.threshold = 5.0``): the constructor, every ``generate`` call (before it touches any state),
        each replayed prompt and ``save_pretrained`` (which would write a ``config.json`` that cannot be loaded
        back) call it. The default checks the training record (:func:`check_training_record`), which the engine
        reads once the output is decoded: an override checks its own settings and calls ``super().check_settings()``."""
        check_training_record(type(self).__name__, self.trained_on, self.trained_for_drafter,
                              self.trained_with_lookup_tokens, self.trained_with_lookup_ngram_size)

    def begin_generation(self) -> None:
        """Called once per ``generate`` call (and per replayed prompt) before its first cycle: reset what
        a policy learns within one call only (transformers makes its candidate generator per call)."""
        return None

    def tree_config(self, state: CycleState) -> TreeConfig:
        """Required: the tree to draft this cycle, a :class:`TreeConfig` ``(depth, top_k, total_tokens,
        sample_drafts)`` (``depth=0``: a plain step). The one hook every policy must define."""
        raise NotImplementedError(_NO_TREE_CONFIG.format(name=type(self).__name__))

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        return step.depth < step.config.depth

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        """How many of the drafted candidates to verify (the best-scoring ones; 0: a plain step), at most: a larger
        int (up to 2**30) is taken as the tree's node count, verifying every candidate. Asked for
        deterministic trees only: a sampled tree (``TreeConfig.sample_drafts``) is verified up to ``total_tokens``,
        since a budget chosen from its drafted scores would make sampling inexact."""
        return info.config.total_tokens - 1

    def observe(self, feedback: CycleFeedback) -> None:
        return None


def check_training_record(
    owner: str,
    trained_on: object,
    trained_for_drafter: object,
    lookup_tokens: object,
    lookup_ngram_size: object,
) -> None:
    """Refuse policy ``owner``'s training record (:class:`DraftPolicy`'s ``trained_on``, ``trained_for_drafter``,
    ``trained_with_lookup_tokens``, ``trained_with_lookup_ngram_size``; what ``mark_trained_on`` records) unless each
    entry is None or of its kind: a :class:`CostCurve`, a :class:`DrafterIdentity`, an int >= 0 and an int >= 1. The
    engine compares them with the call's once the output is decoded, where ``config.json``'s dict form set as an
    attribute failed as a bare ``AttributeError``, losing the output, and a negative length made a report that
    asked for ``prompt_lookup_num_tokens=-2``."""
    for name, value, kind in (("trained_on", trained_on, CostCurve),
                              ("trained_for_drafter", trained_for_drafter, DrafterIdentity)):
        if value is not None and not isinstance(value, kind):
            form = " (config.json's form of it)" if isinstance(value, dict) else ""
            raise ValueError(
                f"{owner}: {name} must be a {kind.__name__} or None, got {value!r}{form}: set "
                f"policy.{name} = {kind.__name__}.from_config({{...}}), or call policy.mark_trained_on(...)."
            )
    for name, value, minimum, what in (
        ("trained_with_lookup_tokens", lookup_tokens, 0, "the prompt-lookup branch's length it was trained with, 0 for "
         "none"),
        ("trained_with_lookup_ngram_size", lookup_ngram_size, 1, "the longest n-gram its prompt-lookup branch matched "
         "in training"),
    ):
        if value is not None:
            check_number(owner, name, value, at_least=minimum, integer=True,
                         meaning=f"{what}; None when not recorded: fix or remove it in a config.json")


def lookup_mismatch(
    policy_name: str,
    trained_with: int | None,
    lookup_tokens: int,
    trained_ngram_size: int | None = None,
    ngram_size: int | None = None,
    learned: bool = True,
) -> str | None:
    """The report for a policy trained with another prompt-lookup branch than the call's: another length
    (``lookup_tokens``, ``prompt_lookup_num_tokens``, 0 without the branch), or the same length matching other
    n-grams (``ngram_size``, ``max_matching_ngram_size``); None when they match or the policy records none.

    A policy trained on trees that carried the branch learned how often its chain carries the accepted path:
    without it, with another length or with other n-grams matched, its choices assume acceptance the call does not
    have, and the output, exact either way, does not show it. ``learned=False``: a static or heuristic policy
    chosen with the branch, ranked again rather than retrained.
    """
    if trained_with is None:
        return None
    if trained_with != lookup_tokens:
        return _other_branch_length(policy_name, trained_with, lookup_tokens, learned)
    if trained_with and trained_ngram_size is not None and ngram_size is not None and trained_ngram_size != ngram_size:
        return (
            f"{policy_name} was trained with a prompt-lookup branch matching n-grams of up to {trained_ngram_size} "
            f"tokens and this call matches up to {ngram_size}: its choices assume another acceptance. Pass "
            f"max_matching_ngram_size={trained_ngram_size} to generate"
            + (f", or retrain the policy with --lookup_ngram_size {ngram_size}." if learned else ".")
        )
    return None


def _other_branch_length(policy_name: str, trained_with: int, lookup_tokens: int, learned: bool) -> str:
    def branch(tokens: int) -> str:
        return f"the {tokens}-token prompt-lookup branch" if tokens else "no prompt-lookup branch"

    advice = (
        f"pass prompt_lookup_num_tokens={trained_with} to generate" if trained_with
        else "drop prompt_lookup_num_tokens"
    )
    # a policy that reads the branch (LTD's --lookup_feature, --lookup_first) is retrained without those settings
    without = "" if lookup_tokens else " and without the settings that need the branch"
    if not learned:
        return (
            f"{policy_name} was chosen with {branch(trained_with)} and this call runs with {branch(lookup_tokens)}: "
            f"its settings assume another acceptance. {advice[0].upper() + advice[1:]}, or rank the trees again for "
            f"this call's branch (`hf-adaptive-spec profile --recording DIR --lookup-tokens {lookup_tokens}`)."
        )
    return (
        f"{policy_name} was trained with {branch(trained_with)} and this call runs with {branch(lookup_tokens)}: its "
        f"choices assume another acceptance. {advice[0].upper() + advice[1:]}, or retrain the policy with "
        f"--lookup_tokens {lookup_tokens}{without}."
    )
