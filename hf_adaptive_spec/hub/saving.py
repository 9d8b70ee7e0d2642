"""What saving an artifact needs besides the mixin's interface: the warning for a subclass saved as its parent, the
refusal of a folder holding another artifact, a dtype cast that keeps float32 tensors, dropping a card the package
wrote, and settings made JSON-plain."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .cards import LIBRARY_NAME
from .config import ARTIFACT_TYPE_KEY, CONFIG_NAME, _kind_of_config
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


#: files that describe a folder's artifact when it holds no ``config.json``: a DVI adapter saved before
#: ``config.json`` (``dvi_config.json``, with an ``artifact_type``), a peft adapter (``adapter_config.json``)
_CONFIG_STAND_INS = ("dvi_config.json", "adapter_config.json")


def check_no_other_artifact(folder: Path, saver: str, holds_own: Callable[[dict[str, Any]], bool]) -> None:
    """Refuse, before anything is written, saving into ``folder`` when it holds another kind of artifact: a
    ``config.json`` (or, without one, a ``dvi_config.json`` or a peft ``adapter_config.json``) that ``holds_own``
    does not accept as the saved kind's, e.g. another ``artifact_type``'s or a transformers model's. Saving there
    replaced that ``config.json`` and left the other files (weights, adapter) beside the new ones: neither artifact
    loaded as saved, and an upload of the folder published both. ``saver`` names the call, e.g.
    ``"StaticTreePolicy.save_pretrained"``, the subject of "would replace its config.json".

    Raises:
        FileExistsError: naming what the folder holds, its files, and what to do.
    """
    described = next((folder / name for name in (CONFIG_NAME, *_CONFIG_STAND_INS) if (folder / name).is_file()), None)
    if described is None:
        return
    try:
        config = json.loads(described.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        config = None
    if isinstance(config, dict) and described.name != "adapter_config.json" and holds_own(config):
        return
    files = sorted(path.name for path in folder.iterdir() if path.name != "README.md")
    held = ", ".join(files[:8]) + (f" and {len(files) - 8} more" if len(files) > 8 else "")
    raise FileExistsError(
        f"{folder} holds {_kind_of_folder(described.name, config)} ({held}): {saver} would replace its "
        f"{CONFIG_NAME} there and leave its other files beside the new ones, so that neither loads as saved (and an "
        "upload of the folder publishes both). Save to a folder of its own, or remove that artifact's files first."
    )


def _kind_of_folder(filename: str, config: object) -> str:
    """What a folder's ``config.json`` (or ``filename``, its stand-in) says the folder holds, for a refusal."""
    if filename == "adapter_config.json":
        return "a peft adapter"
    if not isinstance(config, dict):
        return f"a '{filename}' that is no JSON object"
    declared = config.get(ARTIFACT_TYPE_KEY)
    if isinstance(declared, str):
        holder = registered_class(declared)
        return f"a '{declared}' artifact" + (f" ({holder.__name__})" if holder else "")
    kind = _kind_of_config(config)
    return kind.split(":")[0] if kind else f"a '{filename}' of another program (no '{ARTIFACT_TYPE_KEY}')"


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
