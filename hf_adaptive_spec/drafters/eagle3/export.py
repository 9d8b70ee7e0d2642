"""EAGLE-3 checkpoints written in SpecForge's layout (``config.json`` + ``model.safetensors``, flat keys), which vLLM
and SGLang load unchanged (see README.md): the exported config with both engines' feature-id fields, and the checks
that refuse, before anything is written, a state dict that is not the drafter's or a folder holding other weights or
another artifact's ``config.json``."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch
from safetensors.torch import save_file

from ...hub.location import local_path
from ...hub.saving import check_no_other_artifact
from .configuration import Eagle3DrafterConfig
from .layout import CONFIG_NAME, SAFETENSORS_NAME, SPECFORGE_ARCHITECTURE, holds_eagle3_config
from .modeling import Eagle3DraftModel

logger = logging.getLogger(__name__)


def export_config(config: Eagle3DrafterConfig, dtype: torch.dtype) -> dict:
    """The SpecForge-layout ``config.json`` that vLLM and SGLang read."""
    rope = dict(config.rope_parameters)
    legacy_scaling = None if rope["rope_type"] == "default" else {k: v for k, v in rope.items() if k != "rope_theta"}
    exported = {
        "architectures": [SPECFORGE_ARCHITECTURE],
        "model_type": "llama",
        "num_hidden_layers": config.num_hidden_layers,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": config.head_dim,
        "hidden_act": config.hidden_act,
        "rms_norm_eps": config.rms_norm_eps,
        "attention_bias": config.attention_bias,
        "mlp_bias": config.mlp_bias,
        "max_position_embeddings": config.max_position_embeddings,
        "rope_theta": rope["rope_theta"],  # older stacks read rope_theta / rope_scaling only
        "rope_scaling": legacy_scaling,
        "rope_parameters": rope,
        "vocab_size": config.vocab_size,
        "draft_vocab_size": config.draft_vocab_size,
        "target_hidden_size": config.target_hidden_size,
        "tie_word_embeddings": False,
        "torch_dtype": str(dtype).removeprefix("torch."),
    }
    if config.target_num_hidden_layers is not None:
        exported["target_num_hidden_layers"] = config.target_num_hidden_layers  # ours: refuse other depths
    exported["eagle_config"] = {"use_aux_hidden_state": config.use_aux_hidden_state}
    # both engines' fields, always: else each applies its own per-model default (and a reload, ours)
    ids = list(config.aux_hidden_state_layer_ids)
    exported["eagle_aux_hidden_state_layer_ids"] = ids  # vLLM: input of layer i, used as is
    exported["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [i - 1 for i in ids]  # SGLang captures id + 1
    if not config.use_aux_hidden_state and ids != [config.target_num_hidden_layers]:
        logger.warning(
            f"This drafter reads target hidden state {ids} without aux hidden states; the ids are saved and this "
            "package reloads them, but serving engines may feed a drafter without aux hidden states their own "
            "default feature."
        )
    return exported


def check_no_other_weights(directory: Path) -> None:
    """Refuse, before anything is written, a folder holding ``*.safetensors`` files besides ``model.safetensors``
    (another artifact's, as a DVI adapter's ``adapter_model.safetensors``, or a causal LM's shards): loading reads
    every one of them as the drafter's (:func:`~.checkpoint.read_weights`, as vLLM and SGLang do), so the drafter
    saved beside them would not load, or not as saved."""
    others = sorted(file.name for file in Path(directory).glob("*.safetensors") if file.name != SAFETENSORS_NAME)
    if others:
        raise FileExistsError(
            f"{directory} holds {', '.join(others)}: an EAGLE-3 checkpoint is every *.safetensors file of its folder "
            "(this package, vLLM and SGLang read them all), so an EAGLE-3 drafter saved there would be read with "
            f"them. Save it to a folder of its own, or remove them first."
        )


def _check_state_dict_to_save(model: Eagle3DraftModel, state_dict: dict[str, torch.Tensor]) -> None:
    """Refuse a ``state_dict=`` that is not this drafter's (keys missing or unexpected): it would be written as the
    checkpoint, which then no longer loads (an empty one was written as is). ``embed_tokens.weight`` may be left out
    (the target's, written only for a drafter of another width)."""
    expected = set(model.state_dict())
    missing = sorted(expected - set(state_dict) - {"embed_tokens.weight"})
    unexpected = sorted(set(state_dict) - expected)
    if missing or unexpected:
        raise ValueError(
            f"save_pretrained(state_dict=...) is not this EAGLE-3 drafter's: missing keys {missing}, unexpected keys "
            f"{unexpected}. Pass the drafter's own state dict (model.state_dict(), cast if you like), or none to save "
            "the weights it holds."
        )


def save_checkpoint(
    model: Eagle3DraftModel, directory: str | os.PathLike, state_dict: dict[str, torch.Tensor] | None = None
) -> None:
    """Write ``config.json`` + ``model.safetensors`` in the SpecForge layout.

    Flat keys; ``d2t``/``t2d`` always; ``embed_tokens.weight`` only when the draft width differs
    from the target's (engines take the target's otherwise).
    """
    model.check_embeddings()
    config = model.config
    state = state_dict if state_dict is not None else model.state_dict()
    if state_dict is not None:
        _check_state_dict_to_save(model, state_dict)
    if config.hidden_size == config.target_hidden_size:
        state = {key: value for key, value in state.items() if key != "embed_tokens.weight"}
    directory = local_path(directory)  # "~/x" is the home folder's, as loading reads it
    check_no_other_weights(directory)
    if directory.is_dir():  # a transformers model's or another artifact's config.json: refused before it is replaced
        check_no_other_artifact(directory, "saving an EAGLE-3 drafter", holds_eagle3_config)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {key: value.detach().cpu().contiguous() for key, value in state.items()}
    save_file(tensors, directory / SAFETENSORS_NAME, metadata={"format": "pt"})
    # the dtype of the weights written (a state_dict cast to bfloat16 for a small checkpoint), not the module's
    exported = export_config(config, tensors.get("lm_head.weight", model.lm_head.weight).dtype)
    (directory / CONFIG_NAME).write_text(json.dumps(exported, indent=2) + "\n")
