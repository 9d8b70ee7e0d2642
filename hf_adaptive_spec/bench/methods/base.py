"""The interface every benchmarked decoding method implements."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Protocol

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase, StaticCache

from ...core.drafter_identity import cached_weights_digest
from ...hub import CONFIG_NAME, WEIGHTS_NAME
from ..arguments import MethodOptions, sampling_kwargs
from ..errors import MethodUnavailableError
from ..fast_path import (
    fast_path_compile_config,
    longest_prompt,
    shared_static_cache,
    sized_cache_length,
    sized_cache_lengths,
)


class SpeculationStatsLike(Protocol):
    """The fields of ``hf_adaptive_spec.SpeculationStats`` the benchmark reads."""

    accepted_lengths: list[int]
    draft_depths: list[int]
    verified_tokens: list[int]
    draft_time: float
    verify_time: float
    policy_time: float


class BenchMethod(ABC):
    """One decoding method: builds its ``generate`` kwargs once, then decodes prompts (greedy, or
    sampling at ``MethodOptions.temperature``).

    Subclasses set ``name`` and implement :meth:`method_kwargs`; those that report
    speculation statistics also override :meth:`generate`.
    """

    name: ClassVar[str]

    #: this project's engine (kwargs with ``assistant_policy``): ``--compile`` moves it to the fast path.
    runs_engine: ClassVar[bool] = False
    #: decodes on the fast path with or without ``--compile`` (``stock-compiled``).
    always_fast_path: ClassVar[bool] = False
    #: drafts the static tree of ``--tree-*`` (``tree``, ``eagle3``), so ``<method>@D/K/N`` can give it another one.
    static_tree: ClassVar[bool] = False
    #: drafts its static tree only where the prompt-lookup branch missed (``LookupFirstPolicy``), not every cycle.
    drafts_lookup_first: ClassVar[bool] = False
    #: ``<method>@D/K/N``: this method's own (depth, top_k, total_tokens), over the run's ``--tree-*``.
    tree_shape: tuple[int, int, int] | None = None
    #: the StaticCache each call starts from (reset first), on the fast path; None: generate's own cache.
    static_cache: StaticCache | None = None
    #: ``<method>+sized``: each call decodes in a StaticCache sized for it (:func:`sized_cache_length`)
    #: instead of the run's one cache of ``--max_cache_len`` slots.
    sized_cache: bool = False
    #: the run's ``--max_cache_len`` on the fast path (a sized cache is never longer).
    max_cache_len: int | None = None
    #: ``<method>+fp32``: decodes with the run's float32 copy of the model (the one eager float32 stock's answers come
    #: from) in a run of another dtype, so that a float32 method and bfloat16 peers are timed in one interleaved run.
    in_float32: bool = False
    #: the cache length a warm-up call of a ``+sized`` method decodes in (None: the call's own size).
    warm_up_length: int | None = None
    #: what it learns while decoding carries over from one call to the next (DVI's online head, transformers'
    #: adaptive heuristics), so a resumed run restarts it: the report names such methods.
    carries_state: ClassVar[bool] = False
    #: the options of :class:`MethodOptions` its kwargs read, beyond the run-wide ones (tokens, temperature, the fast
    #: path's) and ``--tree-*``; the bench refuses an option given that no selected method reads (:meth:`options_read`)
    reads_options: ClassVar[tuple[str, ...]] = ()

    def options_read(self, options: MethodOptions) -> set[str]:
        """The method options this method reads with ``options``: its own, and ``--tree-*`` for a static-tree method
        without a tree of its own (``@D/K/N``)."""
        tree = ("tree_depth", "tree_top_k", "tree_total_tokens") if self.static_tree and not self.tree_shape else ()
        return {*self.own_options_read(options), *tree}

    def own_options_read(self, options: MethodOptions) -> set[str]:
        """The options its kwargs read with ``options`` (:attr:`reads_options`), ``--tree-*`` aside."""
        return set(self.reads_options)

    def learns_across_calls(self, options: MethodOptions) -> bool:
        """Whether this method, with ``options``, carries what it learned from one call to the next."""
        return self.carries_state

    def prepare(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions) -> None:
        """Build everything the method needs (drafters, policies, kwargs) once per run.

        Raises:
            MethodUnavailableError: when an artifact the method needs is missing.
        """
        self.model = model
        if self.tree_shape is not None:
            depth, top_k, total_tokens = self.tree_shape
            options = dataclasses.replace(options, tree_depth=depth, tree_top_k=top_k, tree_total_tokens=total_tokens)
        pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.generate_kwargs: dict[str, Any] = {
            "max_new_tokens": options.max_new_tokens,
            **sampling_kwargs(options.temperature),
            "pad_token_id": pad_token_id,
            **self.method_kwargs(model, tokenizer, options),
        }
        if self.on_fast_path(options):
            self.use_fast_path(options)
        elif self.sized_cache:
            raise MethodUnavailableError(
                f"{self.name}: +sized sizes the StaticCache of the compiled fast path: run it with --compile, on a "
                "tree method or stock-compiled."
            )

    def on_fast_path(self, options: MethodOptions) -> bool:
        """Whether this method decodes on the bench's shared StaticCache (``stock-compiled``, or the engine with
        ``--compile``)."""
        return self.always_fast_path or (options.compile and self.runs_engine)

    def use_fast_path(self, options: MethodOptions) -> None:
        """Decode on the bench's shared StaticCache with its compile configuration."""
        if options.max_cache_len is None:
            raise ValueError("the compiled fast path needs MethodOptions.max_cache_len (the bench sets it)")
        room = longest_prompt(self.model, options.max_cache_len, options.max_new_tokens)
        if room < 1:
            needed = options.max_cache_len - room + 1
            raise ValueError(
                f"--max_cache_len {options.max_cache_len} cannot hold a prompt, --max-new-tokens "
                f"{options.max_new_tokens} and the largest verification bucket: pass --max_cache_len >= {needed} "
                "(or leave it unset to fit the questions)"
            )
        self.generate_kwargs["compile_config"] = fast_path_compile_config(self.model.device)
        self.static_cache = shared_static_cache(self.model, options.max_cache_len)
        self.max_cache_len = options.max_cache_len

    def call_kwargs(self, input_ids: torch.LongTensor) -> dict[str, Any]:
        """``generate`` kwargs of the call on ``input_ids``: on the fast path, the shared cache (``+sized``: one
        sized for the call, never longer than the shared one), reset."""
        if self.static_cache is None:
            return self.generate_kwargs
        cache = self.static_cache
        if self.sized_cache:
            length = self.warm_up_length or sized_cache_length(self.model, input_ids.shape[1], self.max_new_tokens)
            cache = shared_static_cache(self.model, min(length, self.max_cache_len))
        cache.reset()
        return {**self.generate_kwargs, "past_key_values": cache}

    def warm_up(self, prompt: torch.LongTensor, calls: int) -> list[list[float]]:
        """``calls`` untimed calls on ``prompt``, in every cache length the method can decode in (``+sized``: each
        size up to the run's cache, the prompt cut to fit), so that no graph compiles during a timed turn; the
        calls' seconds, one list per cache length."""
        seconds = []
        for length in self.warm_up_lengths():
            self.decode_warm_up_in(length)
            try:
                ids = (
                    prompt
                    if length is None
                    else prompt[:, : max(1, longest_prompt(self.model, length, self.max_new_tokens))]
                )
                seconds.append([])
                for _ in range(calls):
                    start = time.perf_counter()
                    self.generate(ids)
                    seconds[-1].append(time.perf_counter() - start)
            finally:
                self.decode_warm_up_in(None)
        return seconds

    def warm_up_lengths(self) -> list[int | None]:
        """The cache lengths a ``+sized`` call can take (:func:`sized_cache_lengths`); ``[None]``, the method's one
        cache, otherwise."""
        if not self.sized_cache:
            return [None]
        return sized_cache_lengths(self.model, self.max_new_tokens, self.max_cache_len)

    @property
    def max_new_tokens(self) -> int:
        return self.generate_kwargs["max_new_tokens"]

    def decode_warm_up_in(self, length: int | None) -> None:
        """Make the next calls decode in a cache of ``length`` slots (None: the size each call needs)."""
        self.warm_up_length = length

    def loaded_digests(self) -> dict[str, str]:
        """Digests of what this method decodes with besides the target, as :meth:`prepare` loaded it: its drafter's
        weights and its policy's settings and weights. A resumed run compares them with the progress file's, so a
        drafter or policy retrained at the same path is refused rather than mixed with the first session's
        records. A part with nothing loaded from a file (no drafter, a policy built from the options) is left out."""
        drafter = self.generate_kwargs.get("assistant_model")
        policy = self.generate_kwargs.get("assistant_policy")
        digests = {"drafter": drafter_digest(drafter), "policy": policy_digest(policy) if policy else None}
        return {part: digest for part, digest in digests.items() if digest}

    def policy_file_digests(self) -> dict[str, str]:
        """The digest of each file of the policy's folder (:func:`policy_file_digests`), where :meth:`loaded_digests`
        names a policy ({} where it names none): what a refused resume names as changed."""
        if "policy" not in self.loaded_digests():
            return {}
        return policy_file_digests(self.generate_kwargs["assistant_policy"])

    @abstractmethod
    def method_kwargs(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions
    ) -> dict[str, Any]:
        """The ``generate`` kwargs that select this method (on top of the decoding settings)."""

    def generate(self, input_ids: torch.LongTensor) -> tuple[list[int], SpeculationStatsLike | None]:
        """Decode one prompt.

        Args:
            input_ids: ``[1, prompt_len]`` prompt tokens on the model's device.

        Returns:
            The generated tokens (prompt excluded) and the speculation statistics, if any.
        """
        sequences = self.model.generate(input_ids=input_ids, **self.call_kwargs(input_ids))
        return new_token_ids(sequences, input_ids), None


def new_token_ids(sequences: torch.LongTensor, input_ids: torch.LongTensor) -> list[int]:
    """Tokens after the prompt in ``sequences`` (``[1, prompt_len + new]``)."""
    return sequences[0, input_ids.shape[1] :].tolist()


def drafter_digest(drafter: Any) -> str | None:
    """A drafter's weights digest: a model's (transformers' assistant), or the drafter's own ``weights_digest()``
    (None for one that has none, or for no drafter)."""
    if isinstance(drafter, torch.nn.Module):
        return cached_weights_digest(drafter)
    digest = getattr(drafter, "weights_digest", None)
    return digest() if callable(digest) else None


def policy_digest(policy: Any) -> str:
    """A policy's settings (those ``save_pretrained`` writes) and, for a network, its weights."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(_policy_settings_text(policy).encode())
    if isinstance(policy, torch.nn.Module):
        digest.update(cached_weights_digest(policy).encode())
    return digest.hexdigest()


def policy_file_digests(policy: Any) -> dict[str, str]:
    """What :func:`policy_digest` covers, digested by the file of the policy's folder that holds it: its settings
    (``config.json``) and, for a network, its weights (``model.safetensors``). A resume refused for a changed policy
    names which changed: a settings edit (a lookup branch added to the config) is no retrained policy."""
    files = {CONFIG_NAME: hashlib.blake2b(_policy_settings_text(policy).encode(), digest_size=16).hexdigest()}
    if isinstance(policy, torch.nn.Module):
        files[WEIGHTS_NAME] = cached_weights_digest(policy)
    return files


def _policy_settings_text(policy: Any) -> str:
    """The policy's class and the settings ``save_pretrained`` writes to ``config.json``, as digested."""
    settings = policy.saved_settings() if hasattr(policy, "saved_settings") else {}
    return f"{type(policy).__qualname__}:{json.dumps(settings, sort_keys=True, default=str)}"
