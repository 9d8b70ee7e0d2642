"""``eagle3``: static-tree speculation with an EAGLE-3 drafter (the shipped one by default); ``eagle3-lookup-first``:
the same tree drafted only where the prompt-lookup branch did not match."""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ...checkpoints import shipped_checkpoint
from ...drafters.eagle3 import Eagle3Drafter
from ...generation import enable
from ...policies import LookupFirstPolicy, StaticTreePolicy
from ..arguments import MethodOptions
from ..errors import MethodUnavailableError
from .tree import Tree

#: one drafter object per (target, checkpoint) for every method of a run: with freezing, each drafter object compiles
#: its own step graphs, and one per method ended a 13-method compiled Spec-Bench run at dynamo's graph limit
_DRAFTERS: weakref.WeakKeyDictionary[PreTrainedModel, dict[str, Eagle3Drafter]] = weakref.WeakKeyDictionary()


def shared_drafter(checkpoint: str, model: PreTrainedModel) -> Eagle3Drafter:
    """The EAGLE-3 drafter of ``checkpoint`` for ``model``, loaded once per run and shared by the methods
    (``generate`` calls are sequential, and each binds the drafter afresh)."""
    loaded = _DRAFTERS.setdefault(model, {})
    if checkpoint not in loaded:
        loaded[checkpoint] = Eagle3Drafter.from_pretrained(checkpoint, target=model)
    return loaded[checkpoint]


class Eagle3(Tree):
    """``Eagle3Drafter`` (``--eagle3-checkpoint`` or the shipped one) + ``StaticTreePolicy``."""

    name = "eagle3"
    reads_options = ("eagle3_checkpoint",)
    tree_policy_class: ClassVar[type[StaticTreePolicy]] = StaticTreePolicy

    def checkpoint(self, options: MethodOptions) -> str:
        """The drafter this method runs."""
        try:
            return str(options.eagle3_checkpoint or shipped_checkpoint("eagle3"))
        except FileNotFoundError as error:
            raise MethodUnavailableError(str(error)) from error

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        checkpoint = self.checkpoint(options)
        enable(model)
        drafter = shared_drafter(checkpoint, model)
        policy = self.tree_policy_class(
            depth=options.tree_depth, top_k=options.tree_top_k, total_tokens=options.tree_total_tokens
        )
        return {"assistant_model": drafter, "assistant_policy": policy, "return_dict_in_generate": True}


class Eagle3LookupFirst(Eagle3):
    """``eagle3`` with ``LookupFirstPolicy``: the static tree of ``--tree-*`` (or ``@D/K/N``), drafted only where the
    prompt-lookup branch did not match; a matched cycle verifies the chain alone. Only as
    ``eagle3-lookup-first+lookup``: without the branch it is ``eagle3``."""

    name = "eagle3-lookup-first"
    tree_policy_class = LookupFirstPolicy
    drafts_lookup_first = True

    def prepare(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions) -> None:
        # with +lookup the wrapper prepares the run (WithLookupBranch.prepare) and this is never called
        raise MethodUnavailableError(
            f"{self.name} drafts only where the prompt-lookup branch did not match: run {self.name}+lookup "
            "(without the branch it is eagle3)."
        )


class Eagle3Candidate(Eagle3):
    """``eagle3`` with a second drafter (``--candidate-checkpoint``) on the same static tree, so one
    interleaved run compares two drafters (e.g. a post-trained one against its starting point)."""

    name = "eagle3-candidate"
    reads_options = ("candidate_checkpoint",)

    def checkpoint(self, options: MethodOptions) -> str:
        if not options.candidate_checkpoint:
            raise MethodUnavailableError("eagle3-candidate needs --candidate-checkpoint PATH (an EAGLE-3 drafter).")
        return options.candidate_checkpoint
