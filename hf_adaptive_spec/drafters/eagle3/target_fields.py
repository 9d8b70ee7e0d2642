"""The draft layer's Llama fields from a target's config, for ``Eagle3DraftModel.from_target``: each read under its
Llama name or another family's (GPT-2, Falcon, GPT-NeoX, Phi, Gemma 2/3...), Llama's default where the target holds
none; a legacy RoPE override and an activation the Llama MLP cannot build are refused."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from transformers import PretrainedConfig
from transformers.activations import ACT2FN

#: The draft layer's Llama fields a target config may hold: under the Llama name first, then under other families'
#: names for the same thing (GPT-2, Falcon, GPT-NeoX, Phi, Gemma 2/3...). The first one set (not None) is used.
_TARGET_FIELD_NAMES: dict[str, tuple[str, ...]] = {
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_hidden_size"),
    "hidden_act": ("hidden_act", "hidden_activation", "activation_function", "activation"),
    "rms_norm_eps": ("rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim",),
    "max_position_embeddings": ("max_position_embeddings",),
    "rope_parameters": ("rope_parameters",),
}

#: Llama's values for fields a target does not hold. The others left out take Eagle3DrafterConfig's defaults (one
#: key/value head per query head, hidden_size // num_attention_heads wide heads, 2048 positions); the MLP width
#: has no width-free Llama default (11008 is for hidden 4096) and takes 4 x hidden_size, GPT-2's and Falcon's.
_LLAMA_DEFAULTS = {
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
}


def _target_field(text: PretrainedConfig, field: str) -> tuple[str, object] | None:
    """(name, value) of ``field`` in a target's text config under the first of its names that is set, else None."""
    for name in _TARGET_FIELD_NAMES[field]:
        value = _falcon_kv_heads(text) if name == "num_kv_heads" else getattr(text, name, None)
        if value is not None:
            return name, value
    return None


def _falcon_kv_heads(text: PretrainedConfig) -> int | None:
    """Falcon's key/value head count as its attention builds it: ``num_kv_heads``, except one for the old decoder's
    multi-query attention (``multi_query`` without ``new_decoder_architecture``, where ``num_kv_heads`` is ignored)."""
    if getattr(text, "multi_query", False) and not getattr(text, "new_decoder_architecture", False):
        return 1
    return getattr(text, "num_kv_heads", None)


def _llama_fields_of(text: PretrainedConfig, skip: Iterable[str] = ()) -> dict:
    """The draft layer's Llama fields from a target's text config, with Llama's defaults where it has none.

    Fields in ``skip`` (those the caller sets) are not read: a target may lack them or hold them in another form.
    """
    fields = {}
    defaults = {**_LLAMA_DEFAULTS, "intermediate_size": 4 * text.hidden_size}
    for field in _TARGET_FIELD_NAMES:
        if field in skip:
            continue
        found = _target_field(text, field)
        if found is not None:
            fields[field] = found[1]
        elif field in defaults:
            fields[field] = defaults[field]
    if "rope_parameters" in fields:  # a copy; per-layer-type RoPE (hybrid targets): the full-attention layers'
        rope = fields["rope_parameters"]
        fields["rope_parameters"] = dict(rope.get("full_attention", rope))
    return fields


def _refuse_legacy_rope(config_kwargs: Mapping) -> None:
    """Refuse ``rope_theta`` / ``rope_scaling`` overrides, naming ``rope_parameters`` (the form the config keeps)."""
    legacy = [name for name in ("rope_theta", "rope_scaling") if name in config_kwargs]
    if legacy:
        raise ValueError(
            f"from_target does not take the legacy {' / '.join(legacy)}: next to the target's rope_parameters the "
            "config silently drops a rope_theta, and a rope_scaling loses the target's rope_theta. Pass the drafter's "
            "whole RoPE as rope_parameters={\"rope_type\": ..., \"rope_theta\": ...}, e.g. "
            "rope_parameters={\"rope_type\": \"default\", \"rope_theta\": 500000.0}."
        )


def _check_activation(name: str, given: bool, text: PretrainedConfig) -> None:
    """Refuse an activation the draft layer's Llama MLP cannot build, naming the option that sets it."""
    if name in ACT2FN:
        return
    source = "given as hidden_act" if given else f"the target's {_target_field(text, 'hidden_act')[0]}"
    raise ValueError(
        f"The drafter's Llama MLP has no activation {name!r} ({source}). Pass hidden_act=... to from_target "
        "with one of transformers' ACT2FN names, e.g. hidden_act='silu' (Llama's) or 'gelu'."
    )
