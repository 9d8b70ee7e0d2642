"""A fixed tree shape for every cycle, and its variant that lets a matched prompt lookup stand in for drafting."""

from __future__ import annotations

from .base import CycleState, DraftPolicy, TreeConfig, TreeSetting, check_tree, policy_tree
from .serialization import PolicyHubMixin, trained_on_setting, tree_settings


class StaticTreePolicy(DraftPolicy, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.static"):
    """Drafts the same tree every cycle.

    Defaults are EAGLE-3's (``EaModel.from_pretrained``: depth 7, top_k 10, total_tokens 60).
    ``top_k=1`` gives a chain of ``depth`` tokens. On a CPU, small trees win: verification cost
    grows quickly with the number of tokens.

    ``policy.depth``, ``top_k``, ``total_tokens`` and ``sample_drafts`` are the tree's (``policy.config``): setting
    one gives the policy a new tree, checked as at construction.

    Example:
        >>> policy = StaticTreePolicy(depth=4, top_k=1, total_tokens=5)  # a 4-token chain
    """

    omits_unset_training_record = True
    depth = TreeSetting()
    top_k = TreeSetting()
    total_tokens = TreeSetting()
    sample_drafts = TreeSetting()

    def __init__(self, depth: int = 7, top_k: int = 10, total_tokens: int = 60, sample_drafts: bool = False, *,
                 trained_on: dict | None = None, trained_for_drafter: dict | None = None,
                 trained_with_lookup_tokens: int | None = None, trained_with_lookup_ngram_size: int | None = None):
        self.config = policy_tree(type(self).__name__, depth=depth, top_k=top_k, total_tokens=total_tokens,
                                  sample_drafts=sample_drafts)
        # what mark_trained_on recorded (a tree ranked on a cost curve: recommended_policy), as config.json holds it
        self._read_training_record(trained_on, trained_for_drafter, trained_with_lookup_tokens,
                                   trained_with_lookup_ngram_size)

    def check_settings(self) -> None:
        super().check_settings()
        check_tree(type(self).__name__, "config", self.config)

    @classmethod
    def chain(cls, depth: int) -> StaticTreePolicy:
        """A single chain of ``depth`` draft tokens."""
        return cls(depth=depth, top_k=1, total_tokens=depth + 1)

    def tree_config(self, state: CycleState) -> TreeConfig:
        return self.config

    def _current_settings(self) -> dict:
        return {**tree_settings(self.config), "sample_drafts": self.config.sample_drafts, **trained_on_setting(self)}

    def __repr__(self) -> str:
        c = self.config
        return f"StaticTreePolicy(depth={c.depth}, top_k={c.top_k}, total_tokens={c.total_tokens})"


class LookupFirstPolicy(StaticTreePolicy, artifact_type="hf_adaptive_spec.policy.lookup_first"):
    """Drafts the same tree every cycle, except where the prompt-lookup branch matched: there the cycle verifies the
    lookup chain alone and the drafter drafts nothing (``CycleState.lookup_length``). With
    ``generate(..., prompt_lookup_num_tokens=N)``; without the branch it is :class:`StaticTreePolicy`.

    Where a many-token forward costs many tokens (bfloat16 on a CPU without bfloat16 matrix instructions) the two
    kinds of cycle cost the same bucket, and each is spent where it is likelier to be right: a match is right more
    often than the drafter's first guess, the drafter fills the cycles prompt lookup cannot.

    Example:
        >>> policy = LookupFirstPolicy(depth=1, top_k=4, total_tokens=2)
        >>> # model.generate(..., assistant_policy=policy, prompt_lookup_num_tokens=1)
    """

    def tree_config(self, state: CycleState) -> TreeConfig:
        return self.config.lookup_first(state)

    def __repr__(self) -> str:
        return "LookupFirstPolicy" + super().__repr__().removeprefix("StaticTreePolicy")


def static_tree_policy(tree: TreeConfig, lookup_first: bool = False) -> StaticTreePolicy:
    """The static policy of ``tree`` (its shape and ``sample_drafts``): a :class:`LookupFirstPolicy` with
    ``lookup_first`` (the static tree a lookup-first learned policy is compared with), else a
    :class:`StaticTreePolicy`."""
    policy_class = LookupFirstPolicy if lookup_first else StaticTreePolicy
    return policy_class(tree.depth, tree.top_k, tree.total_tokens, sample_drafts=tree.sample_drafts)
