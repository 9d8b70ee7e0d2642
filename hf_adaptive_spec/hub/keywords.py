"""The keywords saving, pushing and loading an artifact take, and the refusal of those they do not honour: the tables of
huggingface_hub's push keywords and Hub options, and of transformers' ``push_to_hub`` and ``from_pretrained`` keywords
with what does the same here, and the checks that refuse a keyword before anything is written, uploaded or built,
naming the call and what it takes (a keyword dropped without a word, or a typo, would read as obeyed)."""

from __future__ import annotations

from typing import Any

import torch

from .weights import floating_dtype

#: what ``push_to_hub`` takes besides ``repo_id`` and ``model_card_kwargs`` (huggingface_hub's
#: ``ModelHubMixin.push_to_hub``; ``config`` is what ``save_pretrained(push_to_hub=True)`` hands it)
PUSH_KEYWORDS = ("commit_message", "private", "token", "branch", "create_pr", "allow_patterns", "ignore_patterns",
                 "delete_patterns", "config")
#: what ``from_pretrained`` takes to find the artifact (``hf_hub_download``'s options)
HUB_OPTIONS = ("revision", "cache_dir", "force_download", "token", "local_files_only", "subfolder")
#: what ``save_pretrained`` takes besides ``push_to_hub``'s keywords
SAVE_KEYWORDS = ("config", "repo_id", "push_to_hub", "model_card_kwargs", "is_main_process", "state_dict",
                 "safe_serialization", "max_shard_size")
#: transformers' ``push_to_hub`` keywords that huggingface_hub's does not take, and what does the same here
TRANSFORMERS_PUSH_KEYWORDS = {
    "revision": "For revision=, pass branch= (the branch the commit goes to).",
    "commit_description": "For commit_description=, put the description in commit_message=.",
    "tags": "For tags=, pass model_card_kwargs={'tags': [...]} (the card's tags).",
    "safe_serialization": "The weights are always safetensors: safe_serialization= has nothing to choose.",
    "max_shard_size": "The weights are one safetensors file: max_shard_size= has nothing to split.",
    "use_temp_dir": "The push always saves to a temporary folder: use_temp_dir= has nothing to choose.",
}
#: the fix for transformers' deprecated ``torch_dtype=``, wherever a loader of the package refuses it
TORCH_DTYPE_FIX = "pass dtype= instead (transformers' name too; torch_dtype is deprecated there)"
#: transformers' keywords placing a model's layers on devices (``device_map=``) or on one (``device=``)
PLACEMENT_KEYWORDS = ("device_map", "device")


def placement_fix(loaded: str) -> str:
    """The fix for a :data:`PLACEMENT_KEYWORDS` keyword given to a loader of the package, which loads on the CPU:
    ``loaded`` is the expression of what it loaded, to move after loading."""
    return f"move it after loading, as {loaded}.to(device) (it loads on the CPU)"


#: transformers' ``from_pretrained`` keywords that none of these artifacts uses, each with why (a sentence)
TRANSFORMERS_LOAD_KEYWORDS = {
    "trust_remote_code": "no code is ever loaded from a repo (every artifact class is this package's, or imported).",
    "low_cpu_mem_usage": "artifacts load whole, and are small.",
    "use_safetensors": "weights are always read from safetensors (pickle files never).",
    "output_loading_info": "loading is strict, so there is no missing or unexpected key to report.",
    "attn_implementation": "the attention is the target model's (load the target with it).",
    "quantization_config": "artifacts load unquantised (quantise the target model, if you need to).",
}


def check_save_keywords(
    where: str,
    push_to_hub: bool,
    repo_id: str | None,
    state_dict: dict[str, torch.Tensor] | None,
    safe_serialization: bool,
    max_shard_size: int | str | None,
    push_kwargs: dict[str, Any],
    *,
    saves_state_dict: bool,
    trained: bool,
) -> None:
    """Refuse, before anything is written, a ``save_pretrained`` keyword that would be dropped without a word: one
    it does not take (a typo such as ``pus_to_hub``), a push keyword without ``push_to_hub=True``, transformers'
    ``state_dict=`` where the format writes the module's own (``saves_state_dict`` False; ``trained``: whether the
    artifact holds learned weights, which the error names), ``safe_serialization=False`` and ``max_shard_size=``."""
    refuse_push_keywords(where, push_kwargs, SAVE_KEYWORDS)
    push_only = (["repo_id"] if repo_id is not None else []) + list(push_kwargs)
    if push_only and not push_to_hub:
        named = ", ".join(f"{key}=" for key in push_only)
        raise TypeError(
            f"{where} got {named} without push_to_hub=True: {'it sets' if len(push_only) == 1 else 'they set'} "
            "the push, and nothing is pushed without it. Pass push_to_hub=True to push the folder too, or leave "
            f"{'it' if len(push_only) == 1 else 'them'} out."
        )
    if state_dict is not None and not saves_state_dict:
        holds = "the weights it holds" if trained else "no weights (its config.json is all)"
        raise TypeError(
            f"{where} does not take state_dict=: it writes {holds}, in its own format, so a state dict given "
            "here would not be what is saved. Load the weights into it first (load_state_dict), then save it."
        )
    if safe_serialization is not True:
        raise ValueError(
            f"{where}(safe_serialization={safe_serialization!r}): its weights are always written as safetensors "
            "(pickle files are never written, nor loaded). Leave safe_serialization out."
        )
    if max_shard_size is not None:
        raise TypeError(
            f"{where} does not take max_shard_size=: it writes its weights to one safetensors file, which its "
            "from_pretrained reads (the artifacts are small). Leave max_shard_size out."
        )


def refuse_transformers_keywords(
    model_kwargs: dict[str, Any], where: str, load_keywords: frozenset[str] | None, init_keys: set[str]
) -> None:
    """Refuse transformers' loading keywords (unless ``__init__`` takes them: ``init_keys``), naming what does the
    same here: ``__init__`` would only say it got an unexpected keyword argument. For the default load
    (``load_keywords`` None), ``torch_dtype=``, ``device_map=`` and ``device=`` (a format of its own names the keywords
    it takes instead); for every load, those of :data:`TRANSFORMERS_LOAD_KEYWORDS`, which none of these artifacts
    uses."""
    if load_keywords is None:
        if "torch_dtype" in model_kwargs and "torch_dtype" not in init_keys:
            raise TypeError(f"{where} does not take torch_dtype=: {TORCH_DTYPE_FIX}.")
        for placement in PLACEMENT_KEYWORDS:
            if placement in model_kwargs and placement not in init_keys:
                raise TypeError(f"{where} does not take {placement}=: {placement_fix(f'{where}(path)')}.")
    refused = [key for key in TRANSFORMERS_LOAD_KEYWORDS if key in model_kwargs and key not in init_keys]
    if refused:
        named = ", ".join(f"{key}=" for key in refused)
        raise TypeError(
            f"{where} does not take {named}: {'it is' if len(refused) == 1 else 'they are'} transformers' "
            f"PreTrainedModel.from_pretrained keyword{'s' if len(refused) > 1 else ''}, and {where.split('.')[0]} "
            "takes none of them: "
            + " ".join(TRANSFORMERS_LOAD_KEYWORDS[key] for key in refused)
            + f" Leave {'it' if len(refused) == 1 else 'them'} out."
        )


def pop_load_dtype(
    model_kwargs: dict[str, Any], where: str, load_keywords: frozenset[str] | None, init_keys: set[str] | None
) -> torch.dtype | None:
    """Take ``dtype=`` out of ``model_kwargs`` for the default load (a format of its own that takes it,
    ``load_keywords`` not None, or an ``__init__`` argument named ``dtype``, in ``init_keys``, keeps it): the floating
    ``torch.dtype`` to cast to, None for the saved one (:func:`~.weights.floating_dtype` reads it)."""
    if load_keywords is not None or "dtype" in (init_keys or ()):
        return None
    dtype = floating_dtype(model_kwargs.pop("dtype", None), where,
                           "'auto' (or None) for the dtype its weights were saved in")
    return None if dtype == "auto" else dtype


def refuse_push_keywords(where: str, given: dict[str, Any], own: tuple[str, ...]) -> None:
    """Refuse the keywords of ``given`` that huggingface_hub's ``push_to_hub`` (:data:`PUSH_KEYWORDS`) does not take,
    naming the call, what each transformers keyword is here, and what the call (``own``, then the push's) takes."""
    refused = [key for key in given if key not in PUSH_KEYWORDS]
    if not refused:
        return
    hints = "".join(f" {TRANSFORMERS_PUSH_KEYWORDS[key]}" for key in refused if key in TRANSFORMERS_PUSH_KEYWORDS)
    takes = ", ".join(f"{key}=" for key in dict.fromkeys((*own, *PUSH_KEYWORDS)) if key != "config" or key in own)
    raise TypeError(
        f"{where} does not take {', '.join(f'{key}=' for key in refused)}.{hints} It takes {takes}. Nothing was "
        "saved or uploaded."
    )
