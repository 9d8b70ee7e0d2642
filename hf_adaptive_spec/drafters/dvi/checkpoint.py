"""Saving and loading DVI adapters (the Hub mixin's hooks): peft safetensors, ``config.json`` and the model card. The
online learner's state saved beside them is ``learner_state.py``'s."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from huggingface_hub import ModelCard
from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError
from peft import LoraConfig, get_peft_model_state_dict, set_peft_model_state_dict
from torch import nn

from ...core.features import decoder_layers, unwrap_peft
from ...core.values import check_number
from ...hub.cards import render_card
from ...hub.config import (
    ARTIFACT_TYPE_KEY,
    CONFIG_NAME,
    _kind_of_config,
    check_config_keys,
    check_no_config_overrides,
    read_json_object,
)
from ...hub.errors import (
    ArtifactTypeError,
    MissingArtifactFileError,
    MissingConfigKeyError,
    UnknownConfigKeyError,
    WeightsMismatchError,
)
from ...hub.location import ArtifactLocation
from ...hub.mixin import HubArtifactMixin
from ...hub.registry import load_hint, registered_class
from ...hub.weights import read_safetensors, resolve_safetensors, shape_differences
from .config import (
    DVI_ARTIFACT_TYPE,
    DVI_CONFIG_NAME,
    DVIOnlineLearnerConfig,
    check_online_arguments,
)
from .head import check_config_describes_adapter
from .learner_state import (
    LEARNER_STATE_NAMES,
    ONLINE_STATE_NAME,
    DVILearnerStateMixin,
    saved_online_config,
    warn_schedule_restarts,
)

ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors"
ADAPTER_CONFIG_NAME = "adapter_config.json"
#: the settings a DVI adapter's ``config.json`` holds besides ``artifact_type``
DVI_CONFIG_KEYS = frozenset({"exit_layer", "target_shape"})
#: the name ``dvi_config.json`` (folders saved before ``config.json``) gave ``target_shape``
LEGACY_TARGET_SHAPE_KEY = "target"
#: how a JSON value of another type than an int is named in an error
_JSON_KINDS = {bool: "boolean", float: "float", str: "string", type(None): "null", list: "list", dict: "object"}
#: the paper's proposal depth (k_spec = 4), as a chain.
RECOMMENDED_DEPTH = 4

if TYPE_CHECKING:
    from .drafter import DVIDrafter


def target_shape(target: nn.Module) -> dict[str, int]:
    """The target's shape a DVI adapter is saved with (``config.json``'s ``target_shape``) and loaded onto."""
    target = unwrap_peft(target)
    return {
        "num_hidden_layers": len(decoder_layers(target)),
        "hidden_size": target.config.hidden_size,
        "vocab_size": target.config.vocab_size,
    }


def read_dvi_config(location: ArtifactLocation) -> dict[str, Any]:
    """A DVI adapter's settings (``exit_layer``, ``target_shape``): ``config.json``, or ``dvi_config.json`` in folders
    saved before it (its ``target`` read as ``target_shape``).

    Raises:
        MissingArtifactFileError: neither file is there, or the cache or the Hub could not say (named as such).
        ArtifactTypeError: the folder declares another artifact type.
        MissingConfigKeyError: a setting is missing (a damaged file, or one saved in part).
        ValueError: ``exit_layer`` is no split point of the target the adapter was saved for.
    """
    return read_dvi_config_file(location)[1]


def read_dvi_config_file(location: ArtifactLocation) -> tuple[str, dict[str, Any]]:
    """:func:`read_dvi_config`, with the name of the file that holds the settings (``config.json``, or
    ``dvi_config.json``), which the errors about them name."""
    try:
        path = location.resolve(CONFIG_NAME)
    except MissingArtifactFileError as missing_config:
        path = _legacy_config_path(location, missing_config)
    config = read_json_object(path)
    _check_declares_dvi(location, path.name, config)
    if path.name == DVI_CONFIG_NAME and LEGACY_TARGET_SHAPE_KEY in config:
        config["target_shape"] = config.pop(LEGACY_TARGET_SHAPE_KEY)
    missing = sorted(DVI_CONFIG_KEYS - config.keys())
    if missing:
        raise MissingConfigKeyError(
            f"'{path.name}' of {location} lacks {missing}: the adapter is damaged or was saved or downloaded in part "
            f"(DVIDrafter.save_pretrained writes {sorted(DVI_CONFIG_KEYS)}). Save or download it again."
        )
    _check_saved_exit_layer(location, path.name, config)
    return path.name, config


def _check_saved_exit_layer(location: ArtifactLocation, filename: str, config: dict[str, Any]) -> None:
    """Refuse a saved ``exit_layer`` that is no split point of the target the adapter was saved for (an int in
    ``1 .. num_hidden_layers - 1`` of its saved shape), naming the file: building the drafter would refuse it as a
    constructor argument, which ``from_pretrained`` does not take. A saved shape that is not one is refused by
    :func:`check_target_shape`, which names it."""
    exit_layer = config["exit_layer"]
    shape = config["target_shape"]
    num_layers = shape.get("num_hidden_layers") if isinstance(shape, dict) else None
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 2:
        num_layers = None  # no depth to check against: only that exit_layer is a positive int
    try:  # the project's one rule for an int setting in a range (never a bool)
        check_number("DVIDrafter", "exit_layer", exit_layer, integer=True, at_least=1, below=num_layers)
        return
    except ValueError:
        pass  # refused below, naming the file, the range and the fix
    is_int = isinstance(exit_layer, int) and not isinstance(exit_layer, bool)
    shape_key = LEGACY_TARGET_SHAPE_KEY if filename == DVI_CONFIG_NAME else "target_shape"
    valid = (
        f"an int in 1..{num_layers - 1} for the {num_layers}-layer target the adapter was saved for ('{shape_key}')"
        if num_layers is not None else "an int of at least 1"
    )
    kind = "" if is_int else f" (a {_JSON_KINDS.get(type(exit_layer), type(exit_layer).__name__)}, not an int)"
    raise ValueError(
        f"'{filename}' of {location} holds exit_layer={exit_layer!r}{kind}: exit_layer, the number of the target's "
        f"first layers the draft path runs, must be {valid}. The file was edited or damaged: set exit_layer in "
        f"{filename} to the value the adapter was trained with (its DVI run's --exit_layer), or save or download the "
        "adapter again."
    )


def _legacy_config_path(location: ArtifactLocation, missing_config: MissingArtifactFileError) -> Path:
    """``dvi_config.json``, which folders saved before ``config.json`` hold in its place. When it is not there either,
    the error is ``missing_config`` itself unless the folder or repo was read and lacks both: offline and not cached,
    no such repo or a gated one is the cause to fix, not a damaged adapter."""
    try:
        return location.resolve(DVI_CONFIG_NAME)
    except MissingArtifactFileError as missing_legacy:
        if not _says_file_absent(location, missing_config):
            raise missing_config from missing_config.__cause__
        raise MissingArtifactFileError(
            f"{location} holds neither '{CONFIG_NAME}' nor '{DVI_CONFIG_NAME}' (folders saved before "
            f"'{CONFIG_NAME}'): it is no DVI adapter, or one saved or downloaded in part. Save or download it "
            "again."
        ) from missing_legacy


def _says_file_absent(location: ArtifactLocation, error: MissingArtifactFileError) -> bool:
    """Whether ``error`` (of ``location.resolve``) says the folder or repo lacks the file, rather than that the cache
    or the Hub could not answer (offline and not cached, no such repo, a gated one)."""
    cause = error.__cause__
    remote_absent = isinstance(cause, EntryNotFoundError) and not isinstance(cause, LocalEntryNotFoundError)
    return location.is_local or remote_absent


def _check_declares_dvi(location: ArtifactLocation, filename: str, config: dict[str, Any]) -> None:
    """Refuse a ``config.json`` (or ``dvi_config.json``: ``filename``) that declares another artifact type, or none
    (naming what it is, as the other loaders do)."""
    declared = config.get(ARTIFACT_TYPE_KEY)
    if declared is None:
        kind = _kind_of_config(config)
        raise ArtifactTypeError(
            f"{location} is not a DVI adapter: its '{filename}' declares no '{ARTIFACT_TYPE_KEY}'"
            + (f"; it is {kind}." if kind else ", so it is no hf-adaptive-spec artifact.")
            + " DVIDrafter.from_pretrained(path, target=model) loads a folder a DVIDrafter or DVITrainer saved."
        )
    if declared != DVI_ARTIFACT_TYPE:
        holder = registered_class(declared)
        hint = f" Load it with {load_hint(holder)}." if holder else ""
        raise ArtifactTypeError(f"{location} declares {declared!r}, not a DVI adapter ({DVI_ARTIFACT_TYPE!r}).{hint}")


def _check_legacy_config_keys(loader: str, location: ArtifactLocation, config: dict[str, Any]) -> None:
    """Refuse a key of ``dvi_config.json`` (adapters saved before ``config.json``) that no version wrote, naming that
    file and its keys, as ``hub.config.check_config_keys`` does for ``config.json`` (whose message named
    ``config.json``, which such a folder does not hold). ``config`` is as read, ``target`` renamed ``target_shape``."""
    unknown = sorted(config.keys() - DVI_CONFIG_KEYS - {ARTIFACT_TYPE_KEY})
    if unknown:
        keys = sorted({"exit_layer", LEGACY_TARGET_SHAPE_KEY})
        raise UnknownConfigKeyError(
            f"'{DVI_CONFIG_NAME}' of {location} holds {unknown}, which {loader} does not take (a typo, or a field of "
            f"a newer hf-adaptive-spec): its keys are {keys} and '{ARTIFACT_TYPE_KEY}'. Fix or remove them in "
            f"{DVI_CONFIG_NAME}, or upgrade hf-adaptive-spec."
        )


def check_target_shape(location: ArtifactLocation, saved: dict[str, int], target: nn.Module) -> None:
    """Refuse a target of another shape than the adapter was trained for, before a drafter is built on it (whose
    ``exit_layer`` check would ask for another ``exit_layer``, which ``from_pretrained`` does not take)."""
    shape = target_shape(target)
    if saved != shape:
        raise WeightsMismatchError(
            f"The DVI adapter of {location} was trained for a target with {saved}, but this target has {shape}. "
            f"Load it onto the model it was trained for ('{ADAPTER_CONFIG_NAME}' names it as "
            "base_model_name_or_path), or train an adapter for this one."
        )


class DVICheckpointMixin(DVILearnerStateMixin, HubArtifactMixin):
    """DVI's format in the Hub mixin: the peft adapter of the draft head (safetensors), its
    ``adapter_config.json``, and ``config.json`` with the split point and the target's shape. The
    target itself is never saved: ``from_pretrained(path, target=model)`` rebuilds the drafter on it."""

    #: the learner's files an earlier push left in the repo (``dvi_online_state.json`` of an online drafter, a
    #: training checkpoint's rollout state), deleted by a push that does not upload them anew, as
    #: :meth:`save_pretrained` does in a folder: the repo then describes this drafter alone
    stale_repo_files = tuple(LEARNER_STATE_NAMES)

    def _save_pretrained(self, save_directory: Path) -> None:
        check_config_describes_adapter(self.head)
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
        for name in LEARNER_STATE_NAMES:  # an earlier save's: from_pretrained(online=True) would continue it
            (save_directory / name).unlink(missing_ok=True)
        if self.updater is not None:
            with self._lock:
                state = self.updater.state_dict()
            (save_directory / ONLINE_STATE_NAME).write_text(json.dumps(state) + "\n", encoding="utf-8")

    def generate_model_card(self, **card_kwargs: Any) -> ModelCard:
        """The adapter's card, rendered from ``model_cards/dvi_adapter.md`` with a usage snippet (``usage``, when
        given, replaces it: it was passed twice to the template and failed in a TypeError)."""
        repo_id = card_kwargs.pop("repo_id", None) or "<org>/<name>"
        base_model = card_kwargs.pop("base_model", None) or self._target_name  # the target's Hub id, when given
        target = base_model or "<target>"
        usage = card_kwargs.pop("usage", None) or (
            "import hf_adaptive_spec as hfas\n"
            "from hf_adaptive_spec.drafters.dvi import DVIDrafter\n"
            "from transformers import AutoModelForCausalLM\n\n"
            f'target = hfas.enable(AutoModelForCausalLM.from_pretrained("{target}", attn_implementation="sdpa"))\n'
            f'drafter = DVIDrafter.from_pretrained("{repo_id}", target=target)  # online=True learns on\n'
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
    def _config_keys(cls) -> set[str]:
        """``config.json``'s settings (the split point and the target's shape): the checkpoint, not ``__init__``'s
        arguments, sets the drafter."""
        return set(DVI_CONFIG_KEYS)

    @classmethod
    def _check_location(cls, location: ArtifactLocation) -> None:
        # a folder of another kind is named first (it has no adapter files); a key of a newer version is refused
        filename, config = read_dvi_config_file(location)
        if filename == CONFIG_NAME:
            check_config_keys(cls.__name__, location, config, cls._config_keys())
        else:
            _check_legacy_config_keys(cls.__name__, location, config)
        resolve_safetensors(location, ADAPTER_WEIGHTS_NAME)  # refuse pickle-only repos before unpickling anything
        location.resolve(ADAPTER_CONFIG_NAME)

    load_keywords = frozenset({"target", "online", "online_config", "share_cache"})
    refused_keyword_hints = {  # noqa: RUF012 (read only)
        "dtype": (
            "A DVI adapter has no dtype of its own: its draft path is the target's first layers, final norm and "
            "lm_head, in the target's dtype, and peft keeps the LoRA weights in float32. Load the target in the dtype "
            "you want (AutoModelForCausalLM.from_pretrained(..., dtype=torch.bfloat16), or target.to(dtype)) and "
            "pass it as target= without dtype=."
        ),
    }

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
        drafter's ``save_pretrained`` and the trainer), under the online config saved there unless ``online_config``
        is given (a warning names the schedule settings it changes); an adapter saved without it (offline, as the
        shipped one) starts a fresh schedule, as a warning says (:func:`warn_schedule_restarts`)."""
        if not isinstance(target, nn.Module):
            raise TypeError(
                "DVIDrafter.from_pretrained needs the model it drafts for: from_pretrained(path, target=model)."
            )
        check_online_arguments(online, online_config)  # online="no" learned: the flag was read by its truth
        dvi_config = read_dvi_config(location)
        check_no_config_overrides("DVIDrafter.from_pretrained", dvi_config, config_fields)
        check_target_shape(location, dvi_config["target_shape"], target)
        adapter_config = location.resolve(ADAPTER_CONFIG_NAME)
        read_json_object(adapter_config)  # a damaged file is named as such, not as peft's bare JSONDecodeError
        lora_config = LoraConfig.from_pretrained(str(adapter_config.parent))
        drafter = cls(target, dvi_config["exit_layer"], lora_config=lora_config, share_cache=share_cache)
        drafter._load_adapter(location)
        if online:
            drafter.enable_online(online_config or saved_online_config(location))
            if not drafter._load_online_state(location):
                warn_schedule_restarts(
                    location, drafter.updater.config,
                    "pass online_config=DVIOnlineLearnerConfig(warmup_updates=0, ramp_updates=0) to learn at the "
                    "schedule's final weights from the first update",
                )
        return drafter

    def load_adapter_weights(self, path_or_repo: str | os.PathLike, **location_kwargs: Any) -> None:
        """Load the LoRA weights of a saved adapter into this drafter, in place (optimizer state stays valid)."""
        self._load_adapter(ArtifactLocation(str(path_or_repo), **location_kwargs))

    def _load_adapter(self, location: ArtifactLocation) -> None:
        weights_path = resolve_safetensors(location, ADAPTER_WEIGHTS_NAME)
        state = read_safetensors(weights_path, device=str(self.shallow.device))
        expected = get_peft_model_state_dict(self.head, save_embedding_layers=False)
        missing, unexpected, wrong = shape_differences(
            {name: tuple(tensor.shape) for name, tensor in state.items()},
            {name: tuple(tensor.shape) for name, tensor in expected.items()},
        )
        if missing or unexpected or wrong:
            raise WeightsMismatchError(
                f"'{ADAPTER_WEIGHTS_NAME}' of {location} does not fit this DVI draft head: missing {missing}, "
                f"unexpected {unexpected}, mis-shaped {wrong}.{_rank_hint(state, expected, wrong)}"
            )
        with self._lock:
            set_peft_model_state_dict(self.head, state)


def _rank_hint(saved: dict[str, torch.Tensor], built: dict[str, torch.Tensor], wrong: list[str]) -> str:
    """Why LoRA weights are mis-shaped when their rank is not the one ``adapter_config.json`` builds: the config
    was edited after the adapter was built (saves before such edits were refused)."""
    for key in sorted(wrong):
        if "lora_A" in key:
            return (f" The weights have rank {saved[key].shape[0]} and '{ADAPTER_CONFIG_NAME}' says r="
                    f"{built[key].shape[0]}: set r to {saved[key].shape[0]} there (and lora_alpha to the value "
                    "it trained with).")
    return ""
