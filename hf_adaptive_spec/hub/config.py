"""An artifact's ``config.json``: its constructor arguments plus the ``artifact_type`` naming its class."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import (
    ArtifactError,
    ArtifactTypeError,
    MissingArtifactFileError,
    MissingConfigKeyError,
    UnknownConfigKeyError,
)
from .location import ArtifactLocation

CONFIG_NAME = "config.json"
ARTIFACT_TYPE_KEY = "artifact_type"


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; an error naming the file when it is not one."""
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ArtifactError(f"'{path}' is not valid JSON ({error}): save or download it again.") from error
    if not isinstance(config, dict):
        raise ArtifactError(f"'{path}' must hold a JSON object, got {type(config).__name__}.")
    return config


def check_no_config_overrides(loader: str, saved: dict[str, Any], given: dict[str, Any]) -> None:
    """Refuse keywords a loader would drop: ``given`` is what ``from_pretrained`` received as config fields (the
    saved ``config.json`` merged with the caller's keywords); any that is not the saved value came from the caller."""
    overridden = sorted(key for key, value in given.items() if key not in saved or saved[key] != value)
    if overridden:
        raise TypeError(
            f"{loader} does not take {overridden}: the checkpoint's config.json sets the drafter (a typo of one of "
            "its keywords lands here too)."
        )


#: files that mark folders of other kinds, and how those load
_DVI_ADAPTER = "a DVI adapter: load it with DVIDrafter.from_pretrained(path, target=model)"
_PEFT_ADAPTER = "a peft adapter: load it with peft's PeftModel.from_pretrained(model, path)"
_EAGLE3_DRAFTER = "an EAGLE-3 drafter: load it with Eagle3Drafter.from_pretrained(path, target=model)"
_TRANSFORMERS_MODEL = (
    "a transformers model: load it with AutoModelForCausalLM.from_pretrained(path) (as a drafter: "
    "CausalLMDrafter(model))"
)


def _kind_without_config(location: ArtifactLocation) -> str | None:
    if not location.is_local:  # a Hub repo would need another request; its missing config.json is named as is
        return None
    folder = location.folder
    if (folder / "dvi_config.json").is_file():
        return _DVI_ADAPTER
    if (folder / "adapter_config.json").is_file():
        return _PEFT_ADAPTER
    return None


def _kind_of_config(config: dict[str, Any]) -> str | None:
    architectures = config.get("architectures") or []
    if "LlamaForCausalLMEagle3" in architectures or "draft_vocab_size" in config:
        return _EAGLE3_DRAFTER
    if architectures or "model_type" in config:
        return _TRANSFORMERS_MODEL
    return None


def read_config(location: ArtifactLocation) -> dict[str, Any]:
    """The parsed ``config.json`` of ``location``; a folder of another kind (a DVI or peft adapter) is named."""
    try:
        path = location.resolve(CONFIG_NAME)
    except MissingArtifactFileError as error:
        kind = _kind_without_config(location)
        if kind is None:
            raise
        raise ArtifactTypeError(f"{location} has no '{CONFIG_NAME}': it is {kind}.") from error
    return read_json_object(path)


def read_artifact_type(location: ArtifactLocation) -> str:
    """The ``artifact_type`` declared in ``config.json``, e.g. ``"hf_adaptive_spec.policy.ltd"``."""
    config = read_config(location)
    artifact_type = config.get(ARTIFACT_TYPE_KEY)
    if not isinstance(artifact_type, str):
        kind = _kind_of_config(config)
        raise ArtifactTypeError(
            f"'{CONFIG_NAME}' of {location} has no '{ARTIFACT_TYPE_KEY}' field, so it is not an hf-adaptive-spec "
            "artifact" + (f"; it looks like {kind}." if kind else ".")
        )
    return artifact_type


def check_config_keys(
    owner: str, location: ArtifactLocation, config: dict[str, Any], known_keys: set[str] | None
) -> None:
    """Raise :class:`UnknownConfigKeyError` naming the keys of ``config`` that are neither one of ``known_keys`` (the
    keys class ``owner`` takes; None: any, as an ``__init__`` taking ``**kwargs`` or a ``config``) nor
    ``artifact_type``: a typo, or a field of a newer version, would otherwise be dropped."""
    if known_keys is None:
        return
    unknown = sorted(set(config) - known_keys - {ARTIFACT_TYPE_KEY})
    if unknown:
        raise UnknownConfigKeyError(
            f"'{CONFIG_NAME}' of {location} holds {unknown}, which {owner} does not take (a typo, or a field of a "
            f"newer hf-adaptive-spec): its keys are {sorted(known_keys)} and '{ARTIFACT_TYPE_KEY}'. Fix or remove "
            f"them in {CONFIG_NAME}, or upgrade hf-adaptive-spec."
        )


def check_required_keys(
    owner: str, location: ArtifactLocation, init_kwargs: dict[str, Any], parameters: Mapping[str, inspect.Parameter]
) -> None:
    """Raise :class:`MissingConfigKeyError` naming the arguments of ``owner.__init__`` (``parameters``, ``self``
    first) without a default that neither ``config.json`` nor the caller gives in ``init_kwargs`` (``__init__``
    would only say a positional argument is missing)."""
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    required = [p.name for p in list(parameters.values())[1:]
                if p.default is inspect.Parameter.empty and p.kind in keyword_kinds]
    missing = [name for name in required if name not in init_kwargs]
    if missing:
        given = ", ".join(f"{name}=..." for name in missing)
        raise MissingConfigKeyError(
            f"'{CONFIG_NAME}' of {location} lacks {missing}, which {owner} needs (no default): it was edited, or not "
            f"written by {owner}.save_pretrained. Add them to {CONFIG_NAME}, or pass "
            f"{owner}.from_pretrained(..., {given})."
        )
