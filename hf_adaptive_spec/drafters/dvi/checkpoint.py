"""Saving and loading DVI adapters: peft safetensors, ``dvi_config.json`` and the model card."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from huggingface_hub import HfApi
from peft import LoraConfig, get_peft_model_state_dict, set_peft_model_state_dict
from torch import nn

from ...hub.cards import render_card
from ...hub.errors import ArtifactTypeError, WeightsMismatchError
from ...hub.location import ArtifactLocation
from ...hub.config import read_json_object
from ...hub.weights import read_safetensors, resolve_safetensors
from .config import DVI_ARTIFACT_TYPE, DVI_CONFIG_NAME, DVIOnlineLearnerConfig

ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors"
ADAPTER_CONFIG_NAME = "adapter_config.json"
#: the paper's proposal depth (k_spec = 4), as a chain.
RECOMMENDED_DEPTH = 4

if TYPE_CHECKING:
    from .drafter import DVIDrafter


class DVICheckpointMixin:
    """``save_pretrained`` / ``push_to_hub`` / ``from_pretrained`` of :class:`DVIDrafter` (the adapter only)."""

    def save_pretrained(self, save_directory: str | os.PathLike, **card_kwargs: Any) -> None:
        """Write the peft adapter (safetensors), ``dvi_config.json`` and the model card.

        ``card_kwargs`` go to :func:`hf_adaptive_spec.hub.render_card` (``datasets``,
        ``results``, ``reproduce_command``, ``description``, ``repo_id`` …).
        """
        folder = Path(save_directory)
        folder.mkdir(parents=True, exist_ok=True)
        with self._lock:
            for config in self.head.peft_config.values():
                config.base_model_name_or_path = self._target_name
            # save_embedding_layers=False: peft would otherwise look the target up on the Hub
            self.head.save_pretrained(str(folder), safe_serialization=True, save_embedding_layers=False)
        config = {"artifact_type": DVI_ARTIFACT_TYPE, "exit_layer": self.exit_layer, "target": self._target_shape}
        (folder / DVI_CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        self.model_card(**card_kwargs).save(folder / "README.md")

    def push_to_hub(self, repo_id: str, private: bool | None = None, token: str | None = None, **card_kwargs: Any) -> str:
        """Upload the :meth:`save_pretrained` files to ``repo_id``; returns the commit URL."""
        api = HfApi(token=token)
        api.create_repo(repo_id, private=private, exist_ok=True)
        with tempfile.TemporaryDirectory() as folder:
            self.save_pretrained(folder, repo_id=repo_id, **card_kwargs)
            return str(api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message="Upload DVI adapter"))

    def model_card(self, **card_kwargs: Any):
        """The adapter's card, rendered from ``model_cards/dvi_adapter.md``."""
        repo_id = card_kwargs.pop("repo_id", None) or "<org>/<name>"
        target = self._target_name or "<target>"
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
            "dvi_adapter", method="dvi", base_model=self._target_name, usage=usage, repo_id=repo_id, **card_kwargs
        )

    @classmethod
    def from_pretrained(
        cls,
        path_or_repo: str | os.PathLike,
        target: nn.Module,
        *,
        online: bool = False,
        online_config: DVIOnlineLearnerConfig | None = None,
        share_cache: bool | None = None,
        revision: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        token: str | bool | None = None,
        local_files_only: bool = False,
    ) -> DVIDrafter:
        """Load a DVI adapter (local folder or Hub repo id) for ``target``; safetensors only.

        Raises:
            MissingArtifactFileError: a file is missing (``adapter_model.safetensors``,
                ``adapter_config.json`` or ``dvi_config.json``).
            PickleWeightsError: only pickle weights are there (they are never read).
            ArtifactTypeError: ``dvi_config.json`` is not a DVI adapter's.
            WeightsMismatchError: the adapter does not fit (other target shape, keys or shapes).
        """
        location = ArtifactLocation(
            str(path_or_repo), revision=revision, cache_dir=cache_dir, token=token, local_files_only=local_files_only
        )
        resolve_safetensors(location, ADAPTER_WEIGHTS_NAME)  # refuse pickle-only repos before anything else
        adapter_config_path = location.resolve(ADAPTER_CONFIG_NAME)
        dvi_config = read_json_object(location.resolve(DVI_CONFIG_NAME))
        if dvi_config.get("artifact_type") != DVI_ARTIFACT_TYPE:
            raise ArtifactTypeError(
                f"'{DVI_CONFIG_NAME}' of {location} declares {dvi_config.get('artifact_type')!r}, not {DVI_ARTIFACT_TYPE!r}."
            )
        lora_config = LoraConfig.from_pretrained(str(adapter_config_path.parent))
        drafter = cls(target, dvi_config["exit_layer"], lora_config=lora_config, share_cache=share_cache)
        if dvi_config.get("target", drafter._target_shape) != drafter._target_shape:
            raise WeightsMismatchError(
                f"The DVI adapter of {location} was trained for a target with {dvi_config['target']}, but this target "
                f"has {drafter._target_shape}."
            )
        drafter._load_adapter(location)
        if online:
            drafter.enable_online(online_config)
        return drafter

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
