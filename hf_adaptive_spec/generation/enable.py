"""``enable(model)``: the one-line opt-in that teaches ``model.generate`` tree speculation."""

from __future__ import annotations

import copy
import functools
import inspect
from typing import Any

import torch
from torch import nn
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel, StoppingCriteriaList
from transformers.generation.stopping_criteria import StopStringCriteria
from transformers.utils import logging

from ..core.features import unwrap_peft
from ..core.tree import DraftTree
from ..drafters.base import DraftContext, Drafter
from ..drafters.causal_lm import CausalLMDrafter
from ..policies.base import DraftPolicy, check_tree_config_defined
from .speculative_decoding import speculative_decoding

logger = logging.get_logger(__name__)

NO_DRAFTER_MESSAGE = (
    "The policy asked for a draft tree (depth >= 1) but generate got no assistant_model: pass a drafter "
    "(assistant_model=...), or a policy that drafts nothing (StaticTreePolicy(depth=0, top_k=1, total_tokens=1), "
    "e.g. with prompt_lookup_num_tokens=N for prompt-lookup speculation)."
)


class _NoDrafter(Drafter):
    """Stands in when ``generate`` gets a policy but no ``assistant_model``: cycles that draft
    nothing (depth 0, optionally with the prompt-lookup branch) need no drafter."""

    def bind(self, target: PreTrainedModel) -> None:
        return None

    def begin_tree(self, context: DraftContext) -> torch.Tensor:
        raise ValueError(NO_DRAFTER_MESSAGE)

    def expand(self, tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        raise ValueError(NO_DRAFTER_MESSAGE)


def _as_drafter(assistant_model: object) -> Drafter:
    if assistant_model is None:
        return _NoDrafter()
    if isinstance(assistant_model, Drafter):
        return assistant_model
    if isinstance(assistant_model, PreTrainedModel) and not assistant_model.can_generate():
        raise ValueError(
            f"assistant_model is a {type(assistant_model).__name__}, a network that cannot generate on its own: pass "
            "the drafter that drives it (an Eagle3DraftModel goes in Eagle3Drafter(model), or load one with "
            "Eagle3Drafter.from_pretrained(path, target=model)), or a causal LM sharing the target's tokenizer."
        )
    if isinstance(assistant_model, PreTrainedModel):
        return CausalLMDrafter(assistant_model)
    if isinstance(getattr(assistant_model, "_orig_mod", None), PreTrainedModel):  # torch.compile's OptimizedModule
        raise ValueError(
            f"assistant_model is a torch.compile'd {type(assistant_model._orig_mod).__name__}: pass the model itself "
            "(assistant_model=compiled._orig_mod). The engine compiles its drafting on its own compiled path "
            "(cache_implementation='static' with a compile_config)."
        )
    raise ValueError(
        "assistant_model must be a drafter (an hf_adaptive_spec Drafter such as CausalLMDrafter, or a causal LM "
        f"sharing the target's tokenizer), or None to draft nothing; got {type(assistant_model).__name__}."
    )


def _call_option(model: PreTrainedModel, kwargs: dict, name: str):
    """A generation option as ``generate`` resolves it: the call's keyword (an explicit None included), else the
    ``generation_config`` passed where it sets the field (False included), else the model's."""
    if name in kwargs:
        return kwargs[name]
    config: GenerationConfig | None = kwargs.get("generation_config")
    passed = getattr(config, name, None)
    return passed if passed is not None else getattr(model.generation_config, name, None)


def _unset_option(model: PreTrainedModel, kwargs: dict, name: str) -> None:
    """Unset generation option ``name`` for ``generate``: in a copy of the call's ``generation_config`` when one
    was passed (a keyword beside it draws transformers' deprecation warning, which stock's call would not), else,
    or when the model's own config sets it too (generate fills unset fields from it), by the keyword ``None``."""
    config: GenerationConfig | None = kwargs.get("generation_config")
    if config is not None and getattr(model.generation_config, name, None) is None:
        kwargs["generation_config"] = copy.deepcopy(config)
        setattr(kwargs["generation_config"], name, None)
    else:
        kwargs[name] = None


def _pop_stop_strings(model: PreTrainedModel, kwargs: dict) -> list[str] | str | None:
    """Take stop_strings out of the call (generate cannot see the tokenizer for custom loops)."""
    stop_strings = _call_option(model, kwargs, "stop_strings")
    if stop_strings is not None:  # our criterion replaces generate's (an explicit None stays: it overrides the model's)
        kwargs.pop("stop_strings", None)
        _unset_option(model, kwargs, "stop_strings")
    return stop_strings


def _check_no_token_healing(model: PreTrainedModel, kwargs: dict) -> None:
    """``generate`` heals the prompt before any decoding loop, with a tokenizer it does not keep for a custom one."""
    if _call_option(model, kwargs, "token_healing"):
        raise ValueError(
            "assistant_policy cannot be combined with token_healing (generate does not hand a custom decoding loop "
            "the tokenizer it needs): heal the prompt first, input_ids = model.heal_tokens(input_ids, tokenizer), "
            "then generate with token_healing=False."
        )


def _static_cache_request(model: PreTrainedModel, kwargs: dict) -> str | None:
    """``"engine"`` when the call asks for ``cache_implementation="static"`` without passing a cache:
    the engine then verifies in one of the model's own StaticCaches, the one of the size class that fits
    the call, kept across calls (a cache sized exactly per call, as ``generate`` would build, changes
    shape with every prompt length). The request is taken out of the call so that ``generate`` builds
    no cache of its own."""
    requested = _call_option(model, kwargs, "cache_implementation")  # left in the call unless "static"
    if requested in (None, "dynamic", "hybrid"):  # generate reads "hybrid" (Gemma 2/3's Hub default) as unset
        return None
    if requested != "static":
        raise ValueError(
            f"assistant_policy supports cache_implementation='static' or 'dynamic' (the default), got {requested!r}: "
            "tree speculation needs a cache whose entries it can write after the prefix and compact."
        )
    if kwargs.get("past_key_values") is not None:
        raise ValueError("Pass either cache_implementation='static' or a past_key_values cache, not both.")
    kwargs.pop("cache_implementation", None)
    _unset_option(model, kwargs, "cache_implementation")  # the engine brings its own cache
    return "engine"


def _pop_cache_length(model: PreTrainedModel, kwargs: dict) -> int | None:
    """The call's ``max_cache_len`` for the engine's own static cache (None: the engine sizes it), taken out of the
    call: ``generate``, told no cache implementation, would warn that it ignores it, and it is not ignored."""
    length = _call_option(model, kwargs, "max_cache_len")
    if length is not None:
        kwargs.pop("max_cache_len", None)
        _unset_option(model, kwargs, "max_cache_len")
    return length


def _world_size() -> int:
    """The ranks of the default process group (1 without one, or on a torch built without distributed support)."""
    distributed = torch.distributed
    return distributed.get_world_size() if distributed.is_available() and distributed.is_initialized() else 1


def _check_not_synced(model: PreTrainedModel, kwargs: dict) -> None:
    """Refuse ``synced_gpus`` (given, or set by ``generate`` itself for a model sharded by DeepSpeed ZeRO-3 or FSDP
    over several ranks): each rank would end its speculation at another cycle, and the ranks, which must run every
    forward together, would stop stepping together. ``generate`` does not pass it to a custom decoding loop."""
    synced = kwargs.get("synced_gpus")
    if synced is None:
        from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled
        from transformers.integrations.fsdp import is_fsdp_managed_module

        synced = (is_deepspeed_zero3_enabled() or is_fsdp_managed_module(model)) and _world_size() > 1
    if synced:
        raise ValueError(
            "assistant_policy does not run with synced_gpus (a model sharded over several ranks by DeepSpeed ZeRO-3 "
            "or FSDP, whose ranks must run every forward together): each rank would finish its speculation at "
            "another cycle. Generate with a model each rank holds whole, or drop assistant_policy."
        )


def _check_assistant_tokenizer(assistant_tokenizer: Any, tokenizer: Any) -> None:
    """Refuse ``assistant_tokenizer=`` (the drafter's own tokenizer, transformers' universal assisted generation)
    unless its vocabulary is ``tokenizer``'s: tree speculation reads the drafter's token ids as the target's."""
    if assistant_tokenizer is None or assistant_tokenizer is tokenizer:
        return
    fix = (
        "Tree speculation reads the drafter's token ids as the target's, so the drafter must use the target's "
        "tokenizer. For a drafter with another tokenizer, use transformers' universal assisted generation: "
        "assistant_model= with tokenizer= and assistant_tokenizer=, without assistant_policy."
    )
    if tokenizer is None:
        raise ValueError(f"assistant_tokenizer= needs tokenizer= (the target's) to be checked against. {fix}")
    if assistant_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"assistant_tokenizer= has another vocabulary than tokenizer= (the target's). {fix}")


def _by_name(stock_generate, model: PreTrainedModel, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call's arguments by name: ``generate(input_ids, generation_config)`` passes the config by position, and
    the options the engine resolves from it (stop strings, the static cache, token healing) and the stopping criteria
    it extends are read by name. Too many positional arguments raise ``TypeError`` as stock's call would. A
    ``generate`` that takes ``*args`` (a subclass's wrapper) binds positions itself: they are passed on as given."""
    if not args:  # the usual call: no signature to read
        return args, kwargs
    signature = inspect.signature(stock_generate)
    parameters = list(signature.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return args, kwargs
    bound = signature.bind_partial(model, *args, **kwargs).arguments
    named = {name: value for name, value in bound.items() if name != parameters[0].name}
    extra = next((p.name for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    return (), {**{k: v for k, v in named.items() if k != extra}, **named.get(extra, {})}


def _decode_with_a_cache(model: PreTrainedModel, kwargs: dict) -> None:
    """Tree speculation decodes with a KV cache, and stock's tokens are the same with or without one: a
    ``use_cache=False`` from the model's own ``generation_config`` (checkpoints saved after gradient-checkpointed
    training say so) is overridden as such, one the call asks for (by keyword, or in another ``generation_config``
    it passes) with a warning that it is not applied."""
    config: GenerationConfig | None = kwargs.get("generation_config")
    if "use_cache" in kwargs:
        asked_off = kwargs["use_cache"] is False
        kwargs["use_cache"] = True
    elif config is not None:
        asked_off = config.use_cache is False and config is not model.generation_config
        if config.use_cache is False or model.generation_config.use_cache is False:  # generate fills it from either
            kwargs["generation_config"] = copy.deepcopy(config)
            kwargs["generation_config"].use_cache = True
    else:
        asked_off = False
        if model.generation_config.use_cache is False:
            kwargs["use_cache"] = True
    if asked_off:
        logger.warning_once(
            "use_cache=False is not applied under assistant_policy: tree speculation decodes with a KV cache (the "
            "tokens are the same as stock's without one). Drop it, or drop assistant_policy to decode without a cache."
        )


def _generate(self: PreTrainedModel, *args, assistant_policy: DraftPolicy | None = None, **kwargs):
    """``generate`` with tree speculative decoding when ``assistant_policy`` is given.

    Without ``assistant_policy`` this is exactly the model's own ``generate``. ``assistant_model``
    may be omitted when the policy drafts nothing (depth 0), e.g. for prompt-lookup speculation
    with ``prompt_lookup_num_tokens``.
    """
    stock_generate = type(self).generate
    if assistant_policy is None:
        if isinstance(kwargs.get("assistant_model"), Drafter):
            raise ValueError(
                "An hf_adaptive_spec drafter needs a policy: pass assistant_policy=StaticTreePolicy() (or another "
                "DraftPolicy) together with assistant_model=."
            )
        return stock_generate(self, *args, **kwargs)
    if isinstance(assistant_policy, type) and issubclass(assistant_policy, DraftPolicy):
        raise ValueError(
            f"assistant_policy must be a DraftPolicy instance, got the class {assistant_policy.__name__} itself: "
            f"pass {assistant_policy.__name__}() (with its arguments)."
        )
    if not isinstance(assistant_policy, DraftPolicy):
        raise ValueError(
            "assistant_policy must be a DraftPolicy (e.g. StaticTreePolicy()), "
            f"got {type(assistant_policy).__name__}."
        )
    check_tree_config_defined(assistant_policy)
    assistant_policy.check_settings()  # settings set since construction too, before the call touches any state
    args, kwargs = _by_name(stock_generate, self, args, kwargs)
    if kwargs.get("custom_generate") is not None:
        raise ValueError("assistant_policy cannot be combined with custom_generate.")
    _check_no_token_healing(self, kwargs)
    _decode_with_a_cache(self, kwargs)
    drafter = _as_drafter(kwargs.pop("assistant_model", None))
    tokenizer = kwargs.pop("tokenizer", None)
    _check_assistant_tokenizer(kwargs.pop("assistant_tokenizer", None), tokenizer)
    stopping_criteria = StoppingCriteriaList(kwargs.pop("stopping_criteria", None) or [])
    stop_strings = _pop_stop_strings(self, kwargs)
    if stop_strings:
        if tokenizer is None:
            raise ValueError("stop_strings needs the tokenizer: pass tokenizer=tokenizer to generate.")
        stopping_criteria.append(StopStringCriteria(tokenizer=tokenizer, stop_strings=stop_strings))
    streamer = kwargs.pop("streamer", None)
    _check_not_synced(self, kwargs)
    static_cache = _static_cache_request(self, kwargs)
    cache_length = _pop_cache_length(self, kwargs) if static_cache == "engine" else None
    return stock_generate(
        self,
        *args,
        stopping_criteria=stopping_criteria,
        streamer=streamer,
        custom_generate=speculative_decoding,
        spec_drafter=drafter,
        spec_policy=assistant_policy,
        spec_streamer=streamer,
        spec_static_cache=static_cache,
        spec_cache_length=cache_length,
        **kwargs,
    )


def _transformers_model(model: nn.Module) -> PreTrainedModel:
    """The transformers model inside ``model``: a peft wrapper's, or torch.compile's (whose ``generate`` is the
    model's own)."""
    inner = unwrap_peft(getattr(model, "_orig_mod", model))
    if not isinstance(inner, PreTrainedModel) or not hasattr(inner, "generate"):
        raise ValueError(
            f"enable() needs a transformers causal LM (or a peft model wrapping one), got {type(model).__name__}."
        )
    return inner


def enable(model: nn.Module) -> nn.Module:
    """Let ``model.generate`` take ``assistant_model=drafter, assistant_policy=policy``.

    Patches ``generate`` on this instance only: the class, ``config.architectures`` and
    ``save_pretrained`` are untouched. Idempotent; works on peft-wrapped models. Returns
    ``model``.
    """
    target = _transformers_model(model)
    if not is_enabled(target):
        # a partial, not a bound method: a bound method pickles as getattr(model, "_generate"), so torch.save or
        # pickle of an enabled model wrote a file that did not load
        target.generate = functools.update_wrapper(functools.partial(_generate, target), _generate)  # its help
    return model


def is_enabled(model: nn.Module) -> bool:
    """Whether ``model.generate`` is the engine's (:func:`enable`): read from the instance's ``generate`` itself, so
    a model whose patch was removed (``del model.generate``) is enabled again by ``enable``."""
    engine = vars(_transformers_model(model)).get("generate")
    return isinstance(engine, functools.partial) and engine.func is _generate


def _hint_enable_for_assistant_policy() -> None:
    """On a model that was never enabled, ``generate(assistant_policy=...)`` fails in transformers'
    kwargs check ("model_kwargs are not used by the model"). Add the fix to that error; nothing
    else about the check changes."""
    validate = GenerationMixin._validate_model_kwargs
    if getattr(validate, "_hf_adaptive_spec_hint", False):
        return

    def _validate_model_kwargs(self, model_kwargs: dict):
        try:
            return validate(self, model_kwargs)
        except ValueError as error:
            if "assistant_policy" in model_kwargs and "assistant_policy" in str(error):
                raise ValueError(
                    f"{error}. assistant_policy belongs to hf_adaptive_spec: call hf_adaptive_spec.enable(model) once "
                    "before generate."
                ) from error
            raise

    _validate_model_kwargs._hf_adaptive_spec_hint = True
    GenerationMixin._validate_model_kwargs = _validate_model_kwargs


_hint_enable_for_assistant_policy()
