"""An artifact's ``config.json``: its constructor arguments plus the ``artifact_type`` naming its class."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import ArtifactError, ArtifactTypeError
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


def read_config(location: ArtifactLocation) -> dict[str, Any]:
    """The parsed ``config.json`` of ``location``."""
    return read_json_object(location.resolve(CONFIG_NAME))


def read_artifact_type(location: ArtifactLocation) -> str:
    """The ``artifact_type`` declared in ``config.json``, e.g. ``"hf_adaptive_spec.policy.ltd"``."""
    artifact_type = read_config(location).get(ARTIFACT_TYPE_KEY)
    if not isinstance(artifact_type, str):
        raise ArtifactTypeError(
            f"'{CONFIG_NAME}' of {location} has no '{ARTIFACT_TYPE_KEY}' field, so it is not an hf-adaptive-spec "
            "artifact (a transformers model or a peft adapter loads with that library's from_pretrained)."
        )
    return artifact_type
