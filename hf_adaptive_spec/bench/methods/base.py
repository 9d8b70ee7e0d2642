"""The interface every benchmarked decoding method implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Protocol

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase, StaticCache

from ..arguments import MethodOptions, sampling_kwargs
from ..errors import MethodUnavailableError
from ..fast_path import fast_path_compile_config, shared_static_cache, sized_cache_length


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
    #: the StaticCache each call starts from (reset first), on the fast path; None: generate's own cache.
    static_cache: StaticCache | None = None
    #: ``<method>+sized``: each call decodes in a StaticCache sized for it (:func:`sized_cache_length`)
    #: instead of the run's one cache of ``--max_cache_len`` slots.
    sized_cache: bool = False
    #: the run's ``--max_cache_len`` on the fast path (a sized cache is never longer).
    max_cache_len: int | None = None

    def prepare(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, options: MethodOptions) -> None:
        """Build everything the method needs (drafters, policies, kwargs) once per run.

        Raises:
            MethodUnavailableError: when an artifact the method needs is missing.
        """
        self.model = model
        pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.generate_kwargs: dict[str, Any] = {
            "max_new_tokens": options.max_new_tokens,
            **sampling_kwargs(options.temperature),
            "pad_token_id": pad_token_id,
            **self.method_kwargs(model, tokenizer, options),
        }
        if options.compile and self.runs_engine:
            self.use_fast_path(options)
        elif self.sized_cache:
            raise MethodUnavailableError(
                f"{self.name}: +sized sizes the StaticCache of this project's engine on the compiled fast path: run it with "
                "--compile, on a tree method."
            )

    def use_fast_path(self, options: MethodOptions) -> None:
        """Decode on the bench's shared StaticCache with its compile configuration."""
        if options.max_cache_len is None:
            raise ValueError("the compiled fast path needs MethodOptions.max_cache_len (the bench sets it)")
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
            length = sized_cache_length(self.model, input_ids.shape[1], self.generate_kwargs["max_new_tokens"])
            cache = shared_static_cache(self.model, min(length, self.max_cache_len))
        cache.reset()
        return {**self.generate_kwargs, "past_key_values": cache}

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
