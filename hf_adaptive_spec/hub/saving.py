"""What saving an artifact needs besides the mixin's interface: the warning for a subclass saved as its parent, a
dtype cast that keeps float32 tensors, dropping a card the package wrote, and settings made JSON-plain."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .cards import LIBRARY_NAME
from .registry import qualified_name, registered_class

logger = logging.getLogger(__name__)


def warn_if_saved_as_parent(cls: type) -> None:
    """Say so when a subclass that inherited its parent's ``artifact_type`` is saved: ``AutoDraftPolicy`` will load the
    folder as the parent (as transformers' auto classes load a subclass's folder as its parent). Right for a subclass
    that only observes (a recorder); a subclass that decides otherwise declares its own ``artifact_type``."""
    owner = registered_class(cls.artifact_type)
    if owner is not None and owner is not cls and qualified_name(owner) != qualified_name(cls):
        logger.warning(
            f"{cls.__name__} is saved as {owner.__name__} (it inherits artifact_type '{cls.artifact_type}'): the auto "
            f"classes will load the folder as {owner.__name__}. If {cls.__name__} decides otherwise, declare its own: "
            f"class {cls.__name__}({owner.__name__}, artifact_type=\"{cls.artifact_type.rsplit('.', 1)[0]}.<name>\")."
        )


def cast_keeping_float32(module: nn.Module, dtype: torch.dtype, float32_keys: frozenset[str]) -> None:
    """``module.to(dtype)``, the tensors named in ``float32_keys`` (state-dict keys) kept float32 at their values
    before the cast (a module that keeps them itself, as Re-SpS's ``_apply`` does, loses nothing either way)."""
    kept = {key: tensor for key, tensor in module.state_dict().items() if key in float32_keys}
    module.to(dtype)
    for key, before in kept.items():
        owner_name, _, leaf = key.rpartition(".")
        owner = module.get_submodule(owner_name)
        after = getattr(owner, leaf)
        if after.dtype == torch.float32:
            continue
        restored = before.to(device=after.device, dtype=torch.float32)
        if leaf in owner._parameters:
            owner._parameters[leaf].data = restored
        else:
            owner._buffers[leaf] = restored


def drop_generated_card(folder: Path) -> None:
    """Remove ``folder``'s ``README.md`` when this package wrote it, so that saving again writes the card of what
    is saved now (``ModelHubMixin`` keeps an existing card, which would keep the old numbers); a card written by
    hand (without the package's ``library_name``) is kept."""
    card = folder / "README.md"
    if card.is_file() and f"library_name: {LIBRARY_NAME}" in card.read_text(encoding="utf-8", errors="ignore"):
        card.unlink()


def plain_json_value(value: Any) -> Any:
    """``value`` with what JSON cannot encode but means a number or a list of them made plain: a ``range`` or a
    numpy array as a list, a numpy scalar as a Python number, inside lists, tuples and dicts too; the rest as is."""
    if isinstance(value, range) or (type(value).__module__ == "numpy" and hasattr(value, "tolist")):
        return value.tolist() if hasattr(value, "tolist") else list(value)
    if isinstance(value, (list, tuple)):
        return type(value)(plain_json_value(item) for item in value)
    if isinstance(value, dict):
        return {key: plain_json_value(item) for key, item in value.items()}
    return value
