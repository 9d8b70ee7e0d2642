"""Publishing and loading hf-adaptive-spec artifacts on the Hugging Face Hub (see README.md)."""

from .cards import CARD_KINDS, LIBRARY_NAME, CardResult, card_template, render_card, results_table
from .config import ARTIFACT_TYPE_KEY, CONFIG_NAME, read_artifact_type, read_config
from .errors import (
    ArtifactError,
    ArtifactTypeError,
    HubUnreachableError,
    MissingArtifactFileError,
    MissingConfigKeyError,
    PickleWeightsError,
    UnknownConfigKeyError,
    WeightsMismatchError,
)
from .location import ArtifactLocation
from .mixin import HubArtifactMixin
from .registry import AutoArtifact, register_artifact, registered_class
from .weights import WEIGHTS_NAME, load_weights, resolve_safetensors, save_weights

__all__ = [
    "ARTIFACT_TYPE_KEY",
    "CARD_KINDS",
    "CONFIG_NAME",
    "LIBRARY_NAME",
    "WEIGHTS_NAME",
    "ArtifactError",
    "ArtifactLocation",
    "ArtifactTypeError",
    "AutoArtifact",
    "CardResult",
    "HubArtifactMixin",
    "HubUnreachableError",
    "MissingArtifactFileError",
    "MissingConfigKeyError",
    "PickleWeightsError",
    "UnknownConfigKeyError",
    "WeightsMismatchError",
    "card_template",
    "load_weights",
    "read_artifact_type",
    "read_config",
    "register_artifact",
    "registered_class",
    "render_card",
    "resolve_safetensors",
    "results_table",
    "save_weights",
]
