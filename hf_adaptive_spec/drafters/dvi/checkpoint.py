"""Saving and loading DVI adapters (the Hub mixin's hooks): peft safetensors, ``config.json`` and the model card."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from huggingface_hub import ModelCard
from peft import LoraConfig, get_peft_model_state_dict, set_peft_model_state_dict
from torch import nn

from ...hub.cards import render_card
from ...hub.config import ARTIFACT_TYPE_KEY, CONFIG_NAME, check_no_config_overrides, read_json_object
from ...hub.errors import ArtifactTypeError, MissingArtifactFileError, WeightsMismatchError
from ...hub.location import ArtifactLocation
from ...hub.mixin import HubArtifactMixin
from ...hub.registry import load_hint, registered_class
from ...hub.weights import read_safetensors, resolve_safetensors
from .config import DVI_ARTIFACT_TYPE, DVI_CONFIG_NAME, DVIOnlineLearnerConfig

ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors"
ADAPTER_CONFIG_NAME = "adapter_config.json"
#: the online learner's KL->RL schedule position and reward baseline, saved beside the adapter of an online drafter
ONLINE_STATE_NAME = "dvi_online_state.json"
#: the paper's proposal depth (k_spec = 4), as a chain.
RECOMMENDED_DEPTH = 4

if TYPE_CHECKING:
    from .drafter import DVIDrafter


def read_dvi_config(location: ArtifactLocation) -> dict[str, Any]:
    """A DVI adapter's settings: ``config.json``, or ``dvi_config.json`` in folders saved before it.

    Raises:
        ArtifactTypeError: the folder declares another artifact type.
    """
    try:
        config = read_json_object(location.resolve(CONFIG_NAME))
    except MissingArtifactFileError:
        config = read_json_object(location.resolve(DVI_CONFIG_NAME))
    declared = config.get(ARTIFACT_TYPE_KEY)
    if declared != DVI_ARTIFACT_TYPE:
        holder = registered_class(declared) if declared else None
        hint = f" Load it with {load_hint(holder)}." if holder else ""
        raise ArtifactTypeError(f"{location} declares {declared!r}, not a DVI adapter ({DVI_ARTIFACT_TYPE!r}).{hint}")
    return config


class DVICheckpointMixin(HubArtifactMixin):
    """DVI's format in the Hub mixin: the peft adapter of the draft head (safetensors), its
    ``adapter_config.json``, and ``config.json`` with the split point and the target's shape. The
    target itself is never saved: ``from_pretrained(path, target=model)`` rebuilds the drafter on it."""

    def _save_pretrained(self, save_directory: Path) -> None:
        with self._lock:
            for config in self.head.peft_config.values():
                config.base_model_name_or_path = self._target_name
            # save_embedding_layers=False: peft would otherwise look the target up on the Hub
            self.head.save_pretrained(str(save_directory), safe_serialization=True, save_embedding_layers=False)
        (save_directory / "README.md").unlink(missing_ok=True)  # peft's generic card: the mixin writes the adapter's
        config = {
            ARTIFACT_TYPE_KEY: DVI_ARTIFACT_TYPE, "exit_layer": self.exit_layer, "target_shape": self._target_shape
        }
        (save_directory / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        if self.updater is not None:
            with self._lock:
                state = self.updater.state_dict()
            (save_directory / ONLINE_STATE_NAME).write_text(json.dumps(state) + "\n", encoding="utf-8")

    def generate_model_card(self, **card_kwargs: Any) -> ModelCard:
        """The adapter's card, rendered from ``model_cards/dvi_adapter.md`` with a usage snippet."""
        repo_id = card_kwargs.pop("repo_id", None) or "<org>/<name>"
        base_model = card_kwargs.pop("base_model", None) or self._target_name  # the target's Hub id, when given
        target = base_model or "<target>"
        usage = (
            "import hf_adaptive_spec as hfas\n"
            "from hf_adaptive_spec.drafters.dvi import DVIDrafter\n"
            "from transformers import AutoModelForCausalLM\n\n"
            f'target = hfas.enable(AutoModelForCausalLM.from_pretrained("{target}", attn_implementation="sdpa"))\n'
            f'drafter = DVIDrafter.from_pretrained("{repo_id}", target=target)  # online=True keeps learning\n'
            "out = target.generate(**inputs, assistant_model=drafter, "
            f"assistant_policy=hfas.StaticTreePolicy.chain({RECOMMENDED_DEPTH}))"
        )
        card_kwargs.setdefault(
            "description", f"Draft path: the target's first {self.exit_layer} of {self._num_layers} layers."
        )
        return render_card(
            "dvi_adapter", method="dvi", base_model=base_model, usage=usage, repo_id=repo_id, **card_kwargs
        )

    @classmethod
    def _check_location(cls, location: ArtifactLocation) -> None:
        read_dvi_config(location)  # a folder of another kind is named first (it has no adapter files)
        resolve_safetensors(location, ADAPTER_WEIGHTS_NAME)  # refuse pickle-only repos before unpickling anything
        location.resolve(ADAPTER_CONFIG_NAME)

    load_keywords = frozenset({"target", "online", "online_config", "share_cache"})

    @classmethod
    def _load(
        cls,
        location: ArtifactLocation,
        target: nn.Module | None = None,
        online: bool = False,
        online_config: DVIOnlineLearnerConfig | None = None,
        share_cache: bool | None = None,
        **config_fields: Any,
    ) -> DVIDrafter:
        """Rebuild the drafter on ``target`` from the saved adapter (``config_fields``: what
        ``config.json`` holds, read again here). With ``online=True`` the learner continues the KL->RL schedule
        position and reward baseline saved beside the adapter (``dvi_online_state.json``, written by an online
        drafter's ``save_pretrained`` and the trainer); an adapter saved without it starts a fresh schedule."""
        if not isinstance(target, nn.Module):
            raise TypeError(
                "DVIDrafter.from_pretrained needs the model it drafts for: from_pretrained(path, target=model)."
            )
        dvi_config = read_dvi_config(location)
        check_no_config_overrides("DVIDrafter.from_pretrained", dvi_config, config_fields)
        lora_config = LoraConfig.from_pretrained(str(location.resolve(ADAPTER_CONFIG_NAME).parent))
        drafter = cls(target, dvi_config["exit_layer"], lora_config=lora_config, share_cache=share_cache)
        saved_shape = dvi_config.get("target_shape", dvi_config.get("target", drafter._target_shape))
        if saved_shape != drafter._target_shape:
            raise WeightsMismatchError(
                f"The DVI adapter of {location} was trained for a target with {saved_shape}, but this target "
                f"has {drafter._target_shape}."
            )
        drafter._load_adapter(location)
        if online:
            drafter.enable_online(online_config)
            drafter._load_online_state(location)
        return drafter

    def load_online_state(self, path_or_repo: str | os.PathLike, **location_kwargs: Any) -> bool:
        """Continue the online learner's KL->RL schedule position and reward baseline from the
        ``dvi_online_state.json`` saved beside an adapter (folder or Hub repo), as ``from_pretrained(..., online=True)``
        does. Returns False, changing nothing, when there is none (the schedule stays where it is)."""
        return self._load_online_state(ArtifactLocation(str(path_or_repo), **location_kwargs))

    def _load_online_state(self, location: ArtifactLocation) -> bool:
        if self.updater is None:
            raise RuntimeError(
                "This DVIDrafter is not online: create it with online=True or call enable_online() first."
            )
        try:
            state = read_json_object(location.resolve(ONLINE_STATE_NAME))
        except MissingArtifactFileError:
            return False
        with self._lock:
            self.updater.load_state_dict(state)
        return True

    def load_adapter_weights(self, path_or_repo: str | os.PathLike, **location_kwargs: Any) -> None:
        """Load the LoRA weights of a saved adapter into this drafter, in place (optimizer state stays valid)."""
        self._load_adapter(ArtifactLocation(str(path_or_repo), **location_kwargs))

    def _load_adapter(self, location: ArtifactLocation) -> None:
        weights_path = resolve_safetensors(location, ADAPTER_WEIGHTS_NAME)
        state = read_safetensors(weights_path, device=str(self.shallow.device))
        expected = get_peft_model_state_dict(self.head, save_embedding_layers=False)
        missing, unexpected = sorted(expected.keys() - state.keys()), sorted(state.keys() - expected.keys())
        wrong = [key for key in expected.keys() & state.keys() if expected[key].shape != state[key].shape]
        if missing or unexpected or wrong:
            raise WeightsMismatchError(
                f"'{ADAPTER_WEIGHTS_NAME}' of {location} does not fit this DVI draft head: missing {missing}, "
                f"unexpected {unexpected}, mis-shaped {sorted(wrong)}."
            )
        with self._lock:
            set_peft_model_state_dict(self.head, state)
