"""``<method>+lookup``: any tree method of this project with the prompt-lookup branch grafted onto
every draft tree (``generate(prompt_lookup_num_tokens=..., max_matching_ngram_size=...)``); ``<method>+lookupN``
with a branch of N tokens, whatever ``--lookup-tokens`` says (so one run compares branch lengths)."""

from __future__ import annotations

import re
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..arguments import MethodOptions
from ..errors import MethodUnavailableError, UnknownMethodError
from .base import BenchMethod, SpeculationStatsLike

LOOKUP_SUFFIX = "+lookup"
_LOOKUP_PATTERN = re.compile(re.escape(LOOKUP_SUFFIX) + r"(\d*)$")


def split_lookup(name: str) -> tuple[str, bool, int | None]:
    """``(name without the suffix, whether it had +lookup[N], N or None)``.

    Raises:
        UnknownMethodError: for ``+lookup0``, a branch that proposes nothing.
    """
    match = _LOOKUP_PATTERN.search(name)
    if match is None:
        return name, False, None
    tokens = int(match.group(1)) if match.group(1) else None
    if tokens == 0:
        raise UnknownMethodError(f"{name!r}: {LOOKUP_SUFFIX}N grafts a branch of N >= 1 tokens; drop {LOOKUP_SUFFIX}0.")
    return name[: match.start()], True, tokens


class WithLookupBranch(BenchMethod):
    """Wraps a method whose kwargs carry ``assistant_policy`` (``eagle3``, ``eagle3-ltd``, ``tree``,
    ``plain-steps`` ...) and adds ``--lookup-tokens`` (or its own ``lookup_tokens``) / ``--lookup-ngram-size`` to
    its ``generate``."""

    def __init__(self, base: BenchMethod, lookup_tokens: int | None = None):
        self.base, self.lookup_tokens = base, lookup_tokens
        self.name = base.name + LOOKUP_SUFFIX + (str(lookup_tokens) if lookup_tokens else "")
        self.runs_engine, self.static_tree = base.runs_engine, base.static_tree
        self.drafts_lookup_first = base.drafts_lookup_first

    def own_options_read(self, options: MethodOptions) -> set[str]:
        """The wrapped method's, and the branch's (``--lookup-tokens`` unless ``+lookupN`` gave its own length)."""
        branch = ("lookup_ngram_size", *(() if self.lookup_tokens else ("lookup_tokens",)))
        return {*self.base.own_options_read(options), *branch}

    def learns_across_calls(self, options: MethodOptions) -> bool:
        """As the method it wraps (a resumed run names the methods whose learning restarted)."""
        return self.base.learns_across_calls(options)

    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        kwargs = self.base.method_kwargs(model, tokenizer, options)
        if "assistant_policy" not in kwargs:
            raise MethodUnavailableError(
                f"{self.name}: {LOOKUP_SUFFIX} extends this project's tree methods only (those taking "
                f"assistant_policy); for transformers' own prompt lookup run hf-prompt-lookup."
            )
        return {
            **kwargs,
            "prompt_lookup_num_tokens": self.lookup_tokens or options.lookup_tokens,
            "max_matching_ngram_size": options.lookup_ngram_size,
        }

    def prepare(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions) -> None:
        super().prepare(model, tokenizer, options)
        self.base.model, self.base.generate_kwargs = self.model, self.generate_kwargs
        self.base.static_cache, self.base.sized_cache = self.static_cache, self.sized_cache
        self.base.max_cache_len = self.max_cache_len

    def loaded_digests(self) -> dict[str, str]:
        """The wrapped method's (its drafter, policy or DVI adapter), once :meth:`prepare` shared its kwargs."""
        return self.base.loaded_digests()

    def policy_file_digests(self) -> dict[str, str]:
        """The wrapped method's, as :meth:`loaded_digests`."""
        return self.base.policy_file_digests()

    def decode_warm_up_in(self, length: int | None) -> None:
        super().decode_warm_up_in(length)
        self.base.decode_warm_up_in(length)

    def generate(self, input_ids: torch.LongTensor) -> tuple[list[int], SpeculationStatsLike | None]:
        return self.base.generate(input_ids)
