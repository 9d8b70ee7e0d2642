"""EAGLE-3 checkpoints: read the official EAGLE and the SpecForge layouts (SpecForge's is written by ``export.py``).

Both layouts are a Llama-style ``config.json`` plus flat weight keys (``fc.weight``, ``midlayer.*``,
``norm.weight``, ``lm_head.weight``, ``d2t``, ``t2d``, optional ``embed_tokens.weight``; a drafter of
more layers adds ``layers.1.*``..., and ``layers.0.*`` is read as ``midlayer.*``, vLLM's naming). The
official one says ``architectures: ["LlamaForCausalLM"]`` and has no ``rope_theta`` (RoPE base
10000); SpecForge's says ``["LlamaForCausalLMEagle3"]`` and may add ``head_dim``, RoPE fields and
``eagle_config``. What ``export.py`` writes loads unchanged in vLLM and SGLang (see README.md).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import torch
from huggingface_hub import snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError
from safetensors import SafetensorError, safe_open
from transformers import PretrainedConfig, PreTrainedModel
from transformers.initialization import no_init_weights

from ...core.attention import check_tree_attention_support
from ...core.values import check_flag
from ...hub.config import read_json_object
from ...hub.errors import ArtifactTypeError, MissingArtifactFileError
from ...hub.location import ArtifactLocation
from ...hub.weights import floating_dtype, read_safetensors
from .configuration import Eagle3DrafterConfig, default_aux_layer_ids
from .layout import (
    CONFIG_NAME,
    EAGLE3_CONFIG_FIELDS,
    OFFICIAL_ARCHITECTURE,
    SAFETENSORS_NAME,
    SPECFORGE_ARCHITECTURE,
    declares_eagle3,
)
from .modeling import Eagle3DraftModel

logger = logging.getLogger(__name__)

PICKLE_NAME = "pytorch_model.bin"
#: keys a checkpoint may omit: embeddings (taken from the target), the vocabulary maps (full vocabulary)
OPTIONAL_KEYS = ("embed_tokens.weight", "d2t", "t2d")
#: EAGLE-3.1 / speculators variants whose layer differs from EAGLE-3's, refused when true
UNSUPPORTED_FLAGS = ("fc_norm", "norm_before_residual")
_LLAMA_FIELDS = {f.name for f in dataclasses.fields(Eagle3DrafterConfig)} - {
    f.name for f in dataclasses.fields(PretrainedConfig)
}


def resolve_checkpoint(location: ArtifactLocation, allow_pickle: bool = False) -> Path:
    """The folder holding ``location``'s weights: a local folder as is; for a Hub repo id, its ``config.json`` and
    weights fetched (or found in the local cache, which ``HF_HUB_OFFLINE=1`` forces) with
    ``huggingface_hub.snapshot_download``. Read and check ``config.json`` (``location.resolve``) first: a repo of
    another kind is then refused before its weights are downloaded. A location's ``subfolder`` is the folder returned.

    Raises:
        MissingArtifactFileError: offline, the weights are not in the local cache (its ``config.json`` alone may be).
    """
    if location.is_local:
        return location.folder
    names = [CONFIG_NAME, "*.safetensors"] + ([PICKLE_NAME] if allow_pickle else [])
    try:
        snapshot = Path(snapshot_download(
            location.name, allow_patterns=[location.repo_path(name) for name in names], **location.hub_options()
        ))
    except LocalEntryNotFoundError as error:
        raise MissingArtifactFileError(
            f"The weights of {location} are not in the local Hugging Face cache, and the Hub was not asked (offline "
            f"mode, local_files_only=True, or no connection). Download them once online, or check "
            f"{location.cache_hint()}."
        ) from error
    folder = snapshot / location.subfolder if location.subfolder else snapshot
    if not holds_weights(folder, allow_pickle):
        # offline, snapshot_download returns what the cache holds (config.json alone) without a word: say the weights
        # are not cached (location.resolve does, as for every artifact), rather than that the folder holds none
        try:
            location.resolve(SAFETENSORS_NAME)
        except MissingArtifactFileError as error:
            if isinstance(error.__cause__, LocalEntryNotFoundError):
                raise
    return folder


def holds_weights(directory: Path, allow_pickle: bool = False) -> bool:
    """Whether ``directory`` holds what :func:`read_weights` reads: a ``*.safetensors`` file, or with
    ``allow_pickle`` a ``pytorch_model.bin``."""
    return any(directory.glob("*.safetensors")) or (allow_pickle and (directory / PICKLE_NAME).is_file())


def check_not_causal_lm_config(raw: dict, where: object) -> None:
    """Refuse the ``config.json`` of a plain causal LM (a target's repo passed by mistake): a ``*ForCausalLM``
    architecture of more than one layer, without any EAGLE-3 field (official EAGLE-3 drafters hold one layer)."""
    architectures = raw.get("architectures") or []
    causal_lm = any(str(name).endswith("ForCausalLM") for name in architectures)
    if causal_lm and not declares_eagle3(raw) and raw.get("num_hidden_layers", 1) != 1:
        raise ArtifactTypeError(
            f"{where} holds a causal language model (config.json: architectures {architectures}, "
            f"{raw.get('num_hidden_layers')} layers, none of EAGLE-3's fields {list(EAGLE3_CONFIG_FIELDS)}), not an "
            "EAGLE-3 drafter: load it with AutoModelForCausalLM.from_pretrained(path) (as a drafter: "
            "CausalLMDrafter(model)). If it is an EAGLE-3 drafter, add its draft_vocab_size to config.json."
        )


def holds_causal_lm_weights(folder: Path) -> bool:
    """Whether ``folder``'s safetensors hold a causal LM's layers (``model.layers.*``) and no EAGLE-3 ``fc.weight``,
    read from the files' headers only. Ask only when ``config.json`` is no EAGLE-3 drafter's
    (:func:`~.layout.declares_eagle3`): an EAGLE-3 checkpoint may name its layer ``model.layers.0.*`` (vLLM's names)."""
    names: set[str] = set()
    for file in folder.glob("*.safetensors"):
        try:
            with safe_open(str(file), framework="pt") as handle:
                names.update(handle.keys())
        except SafetensorError:  # unreadable: the loader names the file
            return False
    return not names & {"fc.weight", "model.fc.weight"} and any(name.startswith("model.layers.") for name in names)


def read_weights(directory: Path, allow_pickle: bool = False) -> dict[str, torch.Tensor]:
    """All ``*.safetensors`` files of ``directory``; else ``pytorch_model.bin`` if ``allow_pickle``."""
    files = sorted(directory.glob("*.safetensors"))
    if files:
        weights: dict[str, torch.Tensor] = {}
        for file in files:
            weights.update(read_safetensors(file))
        return weights
    if (directory / PICKLE_NAME).is_file():
        if not allow_pickle:
            raise ValueError(
                f"{directory} holds only {PICKLE_NAME}, a pickle file. Pass allow_pickle=True if you trust it (it is "
                "then read with torch.load(weights_only=True)), or convert it to model.safetensors."
            )
        return torch.load(directory / PICKLE_NAME, map_location="cpu", weights_only=True)
    raise ValueError(
        f"No weights in {directory}: expected {SAFETENSORS_NAME} (or {PICKLE_NAME} with allow_pickle=True)."
    )


def _aux_layer_ids(raw: dict) -> list[int] | None:
    """Layer ids in our (vLLM's, input-of-layer) numbering, from whichever engine's field is present."""
    vllm_ids = raw.get("eagle_aux_hidden_state_layer_ids")
    sglang_ids = (raw.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    from_sglang = [i + 1 for i in sglang_ids] if sglang_ids is not None else None  # SGLang captures id + 1
    if vllm_ids is not None and from_sglang is not None and list(vllm_ids) != from_sglang:
        raise ValueError(
            f"The config's layer ids disagree: eagle_aux_hidden_state_layer_ids={vllm_ids} (vLLM, input of layer i) "
            f"but eagle_config.eagle_aux_hidden_state_layer_ids={sglang_ids} (SGLang, output of layer i, i.e. "
            f"{from_sglang}). Fix one of them."
        )
    return list(vllm_ids) if vllm_ids is not None else from_sglang


def _check_variant_flags(raw: dict) -> None:
    unsupported = [flag for flag in UNSUPPORTED_FLAGS if raw.get(flag)]
    if unsupported:
        raise ValueError(f"The config enables {unsupported}: these EAGLE-3 variants are not supported.")
    # SpecForge's norm_output (default true) applies the final norm before lm_head, as this model always does
    if raw.get("norm_output", True) is not True:
        raise ValueError(
            f"The config sets norm_output={raw['norm_output']!r}: SpecForge then feeds lm_head without the final norm, "
            "which this EAGLE-3 model always applies, so its logits would be wrong. Only norm_output=true (SpecForge's "
            "default) is supported."
        )


def _target_layers(raw: dict, ids: list[int] | None, num_layers: int, ignore_target_mismatch: bool):
    """The target depth the drafter is loaded for and its feature ids: the saved depth (checked against the
    target later), or with ``ignore_target_mismatch`` the target's, the default ids following it."""
    saved = raw.get("target_num_hidden_layers")
    if not ignore_target_mismatch or saved in (None, num_layers):
        return saved if saved is not None else num_layers, ids
    single_feature = not (raw.get("eagle_config") or {}).get("use_aux_hidden_state", True)
    if ids is not None and ids == ([saved] if single_feature else default_aux_layer_ids(saved)):
        ids = None  # saved as the old target's default (the final output for one feature): take the new target's
    return num_layers, ids


def _rope_reads_max_positions(rope: dict) -> bool:
    """Whether this RoPE's frequencies depend on ``max_position_embeddings`` (then it must stay as saved): dynamic
    NTK reads it as the original length; LongRoPE, and YaRN without a ``factor``, derive their factor from it."""
    kind = rope.get("rope_type", "default")
    return kind in ("dynamic", "longrope") or (kind == "yarn" and rope.get("factor") is None)


def config_from_checkpoint(
    raw: dict, target_config: PretrainedConfig, ignore_target_mismatch: bool = False, where: object = "The checkpoint"
) -> Eagle3DrafterConfig:
    """An :class:`Eagle3DrafterConfig` from an official or SpecForge ``config.json`` and the target's config.

    A config that records its target's depth (``target_num_hidden_layers``, which this package writes) is
    refused on a target of another depth unless ``ignore_target_mismatch=True``; a plain causal LM's is refused
    naming it (``where``: the folder or repo, for the message)."""
    check_not_causal_lm_config(raw, where)
    architectures = raw.get("architectures") or []
    if raw.get("speculators_model_type"):
        raise ValueError(
            "This is a checkpoint in vLLM speculators' layout "
            f"(speculators_model_type={raw['speculators_model_type']!r}, "
            f"architectures={architectures}), which this package does not read: its layer sits under "
            "transformer_layer_config and layers.0.*. Convert it to the SpecForge layout (config.json with "
            f"architectures [{SPECFORGE_ARCHITECTURE!r}] and the flat keys), or load the original EAGLE-3 checkpoint."
        )
    if architectures not in ([OFFICIAL_ARCHITECTURE], [SPECFORGE_ARCHITECTURE]):
        raise ValueError(
            f"Not an EAGLE-3 checkpoint config: architectures={architectures}, expected [{OFFICIAL_ARCHITECTURE!r}] "
            f"(official EAGLE-3) or [{SPECFORGE_ARCHITECTURE!r}] (SpecForge)."
        )
    _check_variant_flags(raw)
    fields = {key: value for key, value in raw.items() if key in _LLAMA_FIELDS}
    if "rope_parameters" not in raw:  # legacy RoPE fields; absent rope_theta means base 10000
        fields.update({key: raw[key] for key in ("rope_theta", "rope_scaling") if raw.get(key) is not None})
    text = target_config.get_text_config()
    num_layers, ids = _target_layers(raw, _aux_layer_ids(raw), text.num_hidden_layers, ignore_target_mismatch)
    fields.update(
        target_num_hidden_layers=num_layers,
        aux_hidden_state_layer_ids=ids,
        use_aux_hidden_state=(raw.get("eagle_config") or {}).get("use_aux_hidden_state", True),
    )
    config = Eagle3DrafterConfig(**fields)
    if not _rope_reads_max_positions(config.rope_parameters):
        # reference configs say 2048, which serving engines take as the context limit (sglang#6783)
        config.max_position_embeddings = max(config.max_position_embeddings, text.max_position_embeddings)
    config.check_target(target_config)
    return config


def _without_model_prefix(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The keys without vLLM's ``model.`` prefix (``model.fc.weight``, ``model.layers.0.*``; ``lm_head.weight``,
    ``d2t`` and ``t2d`` may go without it) when every other key carries it; otherwise as they are (the strict key
    check names a stray prefixed key)."""
    unprefixed_ok = ("lm_head.weight", "d2t", "t2d")
    prefixed = [key for key in weights if key.startswith("model.")]
    if not prefixed or any(not key.startswith("model.") and key not in unprefixed_ok for key in weights):
        return weights
    stripped = {key.removeprefix("model."): value for key, value in weights.items()}
    if len(stripped) < len(weights):
        twice = sorted(key for key in weights if f"model.{key}" in weights)
        raise ValueError(f"The checkpoint holds {twice} both with and without the 'model.' prefix. Keep one of each.")
    logger.info("Reading the checkpoint's model.* keys without the 'model.' prefix (vLLM's names).")
    return stripped


def _midlayer_keys(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``layers.0.*`` (vLLM's name of the EAGLE-3 layer) as ``midlayer.*``; refused when both are present."""
    renamed = {("midlayer." + key.removeprefix("layers.0.") if key.startswith("layers.0.") else key): value
               for key, value in weights.items()}
    if len(renamed) < len(weights):
        raise ValueError(
            "The checkpoint holds both midlayer.* and layers.0.* weights: both name the EAGLE-3 layer. Keep one set."
        )
    return renamed


def _check_tensors(model: Eagle3DraftModel, weights: dict[str, torch.Tensor]) -> None:
    """Strict keys and shapes; the vocabulary checks that need the raw ``d2t``/``t2d``."""
    config, expected = model.config, model.state_dict()
    missing = [key for key in expected if key not in weights and key not in (*OPTIONAL_KEYS, "lm_head.weight")]
    unexpected = [key for key in weights if key not in expected]
    if missing or unexpected:
        prefixed = any(key.startswith("model.") for key in unexpected)
        raise ValueError(
            f"The checkpoint does not match an EAGLE-3 drafter of this config: missing keys {missing}, unexpected "
            f"keys {unexpected}. Expected the flat EAGLE-3 keys (fc.weight, midlayer.*, layers.1.*... for each further "
            f"layer of the config's num_hidden_layers={config.num_hidden_layers}, norm.weight, lm_head.weight, d2t, "
            "t2d; no 'model.' prefix)."
            + (" Some keys carry a 'model.' prefix (vLLM's names): remove it, or give it to every key but "
               "lm_head.weight, d2t and t2d." if prefixed else "")
        )
    if "t2d" in weights and weights["t2d"].numel() != config.vocab_size:
        raise ValueError(
            f"Vocabulary mismatch: t2d covers {weights['t2d'].numel()} target tokens, the target has "
            f"{config.vocab_size}. Use a drafter trained for this target's tokenizer."
        )
    if "d2t" not in weights and config.draft_vocab_size < config.vocab_size:
        raise ValueError(
            f"The draft vocabulary is reduced ({config.draft_vocab_size} of {config.vocab_size} tokens) but the "
            "checkpoint has no d2t, so draft ids cannot be mapped to target ids. Add the d2t tensor from training."
        )
    wrong = [
        f"{key} {tuple(value.shape)} (expected {tuple(expected[key].shape)})"
        for key, value in weights.items()
        if key != "t2d" and value.shape != expected[key].shape
    ]
    if wrong:
        raise ValueError(f"Checkpoint tensors do not fit the config: {', '.join(wrong)}.")


def _set_vocab_maps(model: Eagle3DraftModel, weights: dict[str, torch.Tensor]) -> None:
    """``d2t`` from the checkpoint (zeros if absent), ``t2d`` rebuilt from it and checked against the file's. The
    file's tensors are on the CPU and the drafter's on the device it was built on (the default device's, e.g. under
    ``torch.set_default_device("cuda")``): each comparison names its device."""
    config = model.config
    offsets = weights.get("d2t", model.d2t).long()
    model.set_vocab_mapping(torch.arange(config.draft_vocab_size, device=offsets.device) + offsets)
    reduced = config.draft_vocab_size < config.vocab_size
    if reduced and "t2d" in weights and not torch.equal(weights["t2d"].bool().to(model.t2d.device), model.t2d):
        raise ValueError("The checkpoint's d2t and t2d disagree; d2t must hold offsets (target_id - draft_id).")


def _equal_at_lower_precision(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal once both are in the less precise of their dtypes (a bfloat16 copy of float32 weights is the same)."""
    dtype = a.dtype if a.element_size() <= b.element_size() else b.dtype
    return torch.equal(a.to(dtype), b.to(dtype))


def _lm_head(model: Eagle3DraftModel, weights: dict[str, torch.Tensor], target: PreTrainedModel) -> torch.Tensor:
    """The checkpoint's ``lm_head.weight``, or the target's output head when the checkpoint leaves it out (vLLM
    shares it then; SGLang with ``load_lm_head_from_target``), which needs the full vocabulary at the target's width."""
    if "lm_head.weight" in weights:
        return weights["lm_head.weight"]
    config = model.config
    if config.draft_vocab_size != config.vocab_size or config.hidden_size != config.target_hidden_size:
        raise ValueError(
            "The checkpoint has no lm_head.weight, so it shares the target's output head (vLLM's rule, SGLang's "
            f"load_lm_head_from_target), but its draft vocabulary ({config.draft_vocab_size} tokens, width "
            f"{config.hidden_size}) is not the target's ({config.vocab_size}, width {config.target_hidden_size}): add "
            "the trained lm_head.weight to the checkpoint."
        )
    return target.get_output_embeddings().weight


def _embeddings(model: Eagle3DraftModel, weights: dict[str, torch.Tensor], target: PreTrainedModel) -> torch.Tensor:
    """The target's embeddings at the same width (SGLang's rule); the checkpoint's own otherwise."""
    config = model.config
    own = weights.get("embed_tokens.weight")
    if config.hidden_size != config.target_hidden_size:
        if own is None:
            raise ValueError(
                f"The drafter's width ({config.hidden_size}) differs from the target's, so it needs its own trained "
                "embeddings, but the checkpoint has no embed_tokens.weight."
            )
        return own
    target_embeddings = target.get_input_embeddings().weight
    if own is not None and not _equal_at_lower_precision(own, target_embeddings):
        logger.warning("Ignoring the checkpoint's embed_tokens.weight: it differs from the target's, which is used.")
    return target_embeddings


def load_checkpoint(
    path_or_hub_id: str | os.PathLike | ArtifactLocation,
    target: PreTrainedModel,
    allow_pickle: bool = False,
    ignore_target_mismatch: bool = False,
    dtype: torch.dtype | str | None = None,
    *,
    where: str = "Eagle3Drafter.from_pretrained",
    **hub_kwargs,
) -> Eagle3DraftModel:
    """Load an official EAGLE-3 or SpecForge checkpoint as a drafter for ``target``.

    Strict: every weight must be present and used. Embeddings are the target's (SGLang's rule)
    unless the draft width differs, when the checkpoint must carry its own. The model lands on
    the target's device and in ``dtype`` (default: the target's), in eval mode; a trainer keeping
    float32 weights beside a bfloat16 target passes ``torch.float32`` (converting after loading
    would round them through the target's dtype first).

    Args:
        path_or_hub_id: a local directory or a Hub repo id (or an :class:`ArtifactLocation`, ``hub_kwargs`` then
            unused).
        allow_pickle: accept ``pytorch_model.bin`` (read with ``torch.load(weights_only=True)``).
        ignore_target_mismatch: load a drafter saved for a target of another depth on purpose (its
            feature ids must still fit this target; default ids follow the new depth).
        dtype: a floating ``torch.dtype`` for the weights or its name (``"float32"``), ``"auto"`` for the dtype
            the checkpoint's floating weights were saved in (the target's when they differ), or None for the target's.
        where: the call, for the errors (``Eagle3DraftModel.from_pretrained`` loads here too).
        hub_kwargs: ``revision``, ``cache_dir``, ``token``, ``subfolder``... for ``huggingface_hub``'s downloads.
    """
    if not isinstance(target, PreTrainedModel):
        raise TypeError(f"{where} needs the model it drafts for: from_pretrained(path, target=model).")
    check_tree_attention_support(target.config, role="target model")
    for name, flag in (("allow_pickle", allow_pickle), ("ignore_target_mismatch", ignore_target_mismatch)):
        check_flag(where, name, flag)  # "no" was read by its truth: loaded on purpose
    dtype = floating_dtype(dtype, where, "'auto' for the dtype its weights were saved in, or None for the target's")
    location = (path_or_hub_id if isinstance(path_or_hub_id, ArtifactLocation)
                else ArtifactLocation(os.fspath(path_or_hub_id), **hub_kwargs))
    config = config_from_checkpoint(read_json_object(location.resolve(CONFIG_NAME)), target.config,
                                    ignore_target_mismatch, where=location)
    directory = resolve_checkpoint(location, allow_pickle)  # a Hub repo's weights, once its config.json passed
    weights = _midlayer_keys(_without_model_prefix(read_weights(directory, allow_pickle)))
    with no_init_weights():
        model = Eagle3DraftModel(config)
    _check_tensors(model, weights)
    _set_vocab_maps(model, weights)
    state = {**weights, "d2t": model.d2t, "t2d": model.t2d, "embed_tokens.weight": _embeddings(model, weights, target),
             "lm_head.weight": _lm_head(model, weights, target)}
    model.load_state_dict(state, strict=True)
    if dtype == "auto":  # as transformers': the dtype the floating weights were saved in, when they share one
        saved = {tensor.dtype for tensor in weights.values() if tensor.is_floating_point()}
        dtype = saved.pop() if len(saved) == 1 else None
    return model.to(device=target.device, dtype=dtype or target.dtype).eval()
