"""The EAGLE-3 draft model: fused target features + token embedding -> one Llama layer (or more) -> draft vocabulary.

Module names follow the EAGLE-3 checkpoints (``fc``, ``midlayer.*``, ``norm``, ``lm_head``, ``d2t``,
``t2d``, ``embed_tokens``; a deeper drafter's further layers ``layers.1.*``, ``layers.2.*``... as in
vLLM's multi-layer EAGLE-3, which reads ``midlayer.*`` as ``layers.0.*``), so ``state_dict()`` keys are
the checkpoint keys.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import Cache, PreTrainedModel
from transformers.masking_utils import create_causal_mask
from transformers.models.llama.modeling_llama import (
    LlamaAttention,
    LlamaDecoderLayer,
    LlamaMLP,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
)
from transformers.utils import ModelOutput

from ...hub.location import ArtifactLocation
from ..base import vocab_mapping_problem
from .configuration import Eagle3DrafterConfig
from .target_fields import _check_activation, _llama_fields_of, _refuse_legacy_rope


@dataclass
class Eagle3DraftOutput(ModelOutput):
    """Output of one draft step.

    Args:
        logits: ``[batch, kept positions, draft_vocab_size]`` logits over the draft vocabulary
            (``[rows, draft_vocab_size]`` with a ``logits_index``; None when the step was asked not to compute them).
        prenorm_hidden_states: ``[batch, seq, hidden_size]`` layer output before the final norm: the
            hidden input of the next draft step (EAGLE feeds these back, not the normed ones).
    """

    logits: torch.FloatTensor | None = None
    prenorm_hidden_states: torch.FloatTensor | None = None


def check_logits_index(logits_index: tuple[torch.Tensor, torch.Tensor], logits_to_keep: int) -> None:
    """Refuse a ``logits_index`` that is not two index tensors, or one given with ``logits_to_keep``."""
    if logits_to_keep:
        raise ValueError("Pass logits_to_keep or logits_index, not both: each chooses the positions given logits.")
    is_pair = isinstance(logits_index, tuple) and len(logits_index) == 2
    if not (is_pair and all(torch.is_tensor(index) for index in logits_index)):
        raise ValueError(
            f"logits_index takes (batch indices, position indices), as mask.nonzero(as_tuple=True); got "
            f"{type(logits_index).__name__}. For a boolean mask, pass mask.nonzero(as_tuple=True)."
        )


class Eagle3Attention(LlamaAttention):
    """Llama attention whose q/k/v read the ``2 * hidden_size`` wide ``[embedding ‖ hidden]`` input."""

    def __init__(self, config: Eagle3DrafterConfig):
        super().__init__(config, layer_idx=0)
        width, bias = 2 * config.hidden_size, config.attention_bias
        self.q_proj = nn.Linear(width, config.num_attention_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(width, config.num_key_value_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(width, config.num_key_value_heads * self.head_dim, bias=bias)


class Eagle3DecoderLayer(nn.Module):
    """EAGLE-3's ``midlayer``: attention over ``[input_layernorm(embedding) ‖ hidden_norm(hidden)]``.

    The residual stream is the hidden input *before* ``hidden_norm``; then the usual
    ``post_attention_layernorm`` + SwiGLU MLP.
    """

    def __init__(self, config: Eagle3DrafterConfig):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.hidden_norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.self_attn = Eagle3Attention(config)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(
        self,
        embeddings: torch.Tensor,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None,
        past_key_values: Cache | None,
    ) -> torch.Tensor:
        residual = hidden_states
        joint = torch.cat([self.input_layernorm(embeddings), self.hidden_norm(hidden_states)], dim=-1)
        attended, _ = self.self_attn(
            joint,
            position_embeddings=position_embeddings,
            attention_mask=attention_mask,
            past_key_values=past_key_values,
        )
        hidden_states = residual + attended
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class Eagle3DraftModel(PreTrainedModel):
    """The EAGLE-3 drafter network (trainable; :class:`Eagle3Drafter` runs it inside ``generate``).

    Draft position ``t`` takes the target feature of token ``t`` and the embedding of token ``t+1``
    and predicts token ``t+2``. With ``num_hidden_layers > 1`` plain Llama decoder layers follow the
    EAGLE-3 layer on its residual stream (``layers``, keyed from ``"1"``; KV cache layers ``1..``).
    Token embeddings are the target's, frozen; they must be set from a target (:meth:`from_target`,
    :meth:`set_embeddings`) or loaded before the model runs.

    Buffers: ``d2t`` (``[draft_vocab]`` int64 offsets, ``target_id = draft_id + d2t[draft_id]``) and
    ``t2d`` (``[vocab]`` bool, True for target tokens in the draft vocabulary).
    """

    config_class = Eagle3DrafterConfig
    config: Eagle3DrafterConfig
    base_model_prefix = ""
    _supports_sdpa = True

    def __init__(self, config: Eagle3DrafterConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_tokens.weight.requires_grad_(False)
        features_width = config.num_features * config.target_hidden_size
        self.fc = nn.Linear(features_width, config.hidden_size, bias=False) if config.use_aux_hidden_state else None
        self.midlayer = Eagle3DecoderLayer(config)
        further = range(1, config.num_hidden_layers)
        self.layers = nn.ModuleDict({str(i): LlamaDecoderLayer(config, layer_idx=i) for i in further})
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.draft_vocab_size, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(config)
        self.register_buffer("d2t", torch.zeros(config.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(config.vocab_size, dtype=torch.bool))
        self.t2d[: config.draft_vocab_size] = True
        self.embeddings_ready = False
        self.register_load_state_dict_post_hook(_mark_loaded_embeddings)
        self.post_init()

    @classmethod
    def from_target(
        cls,
        target: PreTrainedModel,
        draft_to_target: torch.LongTensor | None = None,
        *,
        dtype: torch.dtype | None = None,
        **config_kwargs,
    ) -> Eagle3DraftModel:
        """A randomly initialised drafter for ``target``, to train, on its device and in ``dtype`` (default:
        the target's).

        The draft layer is a Llama layer whatever the target. Its Llama fields (RoPE included) default to
        the target's, read under their Llama names or another family's (``target_fields._TARGET_FIELD_NAMES``: GPT-2's
        ``n_inner``, ``activation_function``, ``layer_norm_epsilon``; Gemma 2/3's ``hidden_activation``;
        Falcon's ``ffn_hidden_size``, ``num_kv_heads``...); a field the target has under no such name gets
        Llama's default (RoPE base 10000, ``silu``, eps 1e-6, one key/value head per query head), except the
        MLP width: 4 x ``hidden_size``. ``config_kwargs`` set any :class:`Eagle3DrafterConfig` field; the
        target's is then not read. An activation the Llama MLP does not know (not in transformers' ``ACT2FN``)
        is refused: pass ``hidden_act=``. RoPE is set with ``rope_parameters=`` only: a legacy ``rope_theta``
        / ``rope_scaling`` is refused (next to the target's ``rope_parameters`` the config silently drops the
        one or the target's ``rope_theta``).
        Embeddings are copied from the target (frozen) when the widths match; otherwise set them with
        :meth:`set_embeddings`.

        Args:
            draft_to_target: ``[draft_vocab]`` sorted target ids of a reduced draft vocabulary
                (EAGLE's most frequent tokens); None for the full vocabulary.
        """
        _refuse_legacy_rope(config_kwargs)
        text = target.config.get_text_config()
        fields = {
            "vocab_size": text.vocab_size,
            "hidden_size": text.hidden_size,
            "num_attention_heads": text.num_attention_heads,
            "target_hidden_size": text.hidden_size,
            "target_num_hidden_layers": text.num_hidden_layers,
            "draft_vocab_size": len(draft_to_target) if draft_to_target is not None else None,
        }
        fields.update(_llama_fields_of(text, skip=config_kwargs.keys()))
        fields.update(config_kwargs)
        _check_activation(fields["hidden_act"], given="hidden_act" in config_kwargs, text=text)
        config = Eagle3DrafterConfig(**fields)
        config.check_target(target.config)
        model = cls(config)
        if draft_to_target is not None:
            model.set_vocab_mapping(draft_to_target)
        if config.hidden_size == text.hidden_size:
            model.set_embeddings(target.get_input_embeddings().weight)
        return model.to(device=target.device, dtype=dtype or target.dtype)

    def set_embeddings(self, weight: torch.Tensor) -> None:
        """Copy ``[vocab, hidden_size]`` token embeddings (the target's, or the drafter's trained own)."""
        if tuple(weight.shape) != tuple(self.embed_tokens.weight.shape):
            raise ValueError(
                f"Embeddings of shape {tuple(weight.shape)} do not fit the drafter's "
                f"{tuple(self.embed_tokens.weight.shape)} (vocab_size x hidden_size)."
            )
        with torch.no_grad():
            self.embed_tokens.weight.copy_(weight)
        self.embeddings_ready = True

    def check_embeddings(self) -> None:
        """Refuse to run (or save) with embeddings that were neither set from a target nor loaded."""
        if not self.embeddings_ready:
            raise ValueError(
                "The drafter's token embeddings were never set: they are random. Build it with "
                "Eagle3DraftModel.from_target(target), load it with Eagle3Drafter.from_pretrained(..., target=...), "
                "or call set_embeddings(target.get_input_embeddings().weight)."
            )

    def set_vocab_mapping(self, draft_to_target: torch.LongTensor) -> None:
        """Set ``d2t`` and ``t2d`` from the target id of every draft token (``[draft_vocab]``, distinct)."""
        ids = torch.as_tensor(draft_to_target, dtype=torch.long, device=self.d2t.device)
        vocab, draft_vocab = self.config.vocab_size, self.config.draft_vocab_size
        problem = vocab_mapping_problem(ids, vocab, draft_vocab)
        if problem is not None:
            raise ValueError(
                f"The draft vocabulary must map its {draft_vocab} tokens to distinct target ids in 0..{vocab - 1} "
                f"(the mapping is {problem}); check d2t, which holds offsets (target_id - draft_id), not target ids."
            )
        self.d2t.copy_(ids - torch.arange(draft_vocab, device=ids.device))
        self.t2d.zero_()
        self.t2d[ids] = True

    def draft_to_target(self) -> torch.LongTensor:
        """``[draft_vocab]`` target id of each draft token (``arange + d2t``)."""
        return torch.arange(self.config.draft_vocab_size, device=self.d2t.device) + self.d2t

    def gather_target_features(
        self, hidden_states: Mapping[int, torch.Tensor] | Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Concatenate the target hidden states the drafter reads, ``[..., num_features * target_hidden_size]``.

        ``hidden_states`` is indexed by transformers' ``hidden_states`` numbering: the tuple of
        ``output_hidden_states=True`` or the engine's ``DraftContext.new_features``.
        """
        return torch.cat([hidden_states[i] for i in self.config.aux_hidden_state_layer_ids], dim=-1)

    def forward(
        self,
        input_ids: torch.LongTensor,
        hidden_states: torch.Tensor,
        target_features: bool = True,
        position_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        logits_to_keep: int = 0,
        compute_logits: bool = True,
        logits_index: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> Eagle3DraftOutput:
        """One draft step over ``seq`` positions.

        Args:
            input_ids: ``[batch, seq]`` target-vocabulary ids; position ``t`` holds token ``t+1``.
            hidden_states: with ``target_features=True``, ``[batch, seq, num_features * target_hidden_size]``
                target features of token ``t`` (:meth:`gather_target_features`); with False,
                ``[batch, seq, hidden_size]`` ``prenorm_hidden_states`` of the previous draft step.
            target_features: which of the two ``hidden_states`` holds (explicit, never a width test).
            position_ids: ``[batch, seq]``; defaults to the positions after ``past_key_values``.
            attention_mask: a 4D additive mask used as is (e.g. a tree mask), or a 2D padding mask
                / None for causal attention.
            past_key_values: KV cache to extend (one layer per decoder layer).
            logits_to_keep: compute logits for the last positions only (0: all).
            compute_logits: False skips the norm and ``lm_head`` (the caller applies them, as the
                engine plug-in does through :class:`~hf_adaptive_spec.core.OutputHead`).
            logits_index: ``(batch indices, position indices)``, as ``mask.nonzero(as_tuple=True)``: logits only
                there, returned as ``[rows, draft_vocab_size]`` in the indices' order, e.g. the positions a
                training loss reads.
        """
        if logits_index is not None:  # the decoding path passes none: no call there
            check_logits_index(logits_index, logits_to_keep)
        self.check_embeddings()
        width = self.fc.in_features if target_features and self.fc is not None else self.config.hidden_size
        if hidden_states.shape[-1] != width:
            kind = "target features" if target_features else "draft hidden states"
            raise ValueError(f"hidden_states holds {kind} of width {width}, got {hidden_states.shape[-1]}.")
        if target_features and self.fc is not None:
            hidden_states = self.fc(hidden_states)
        embeddings = self.embed_tokens(input_ids).to(hidden_states.dtype)
        if position_ids is None:
            past = past_key_values.get_seq_length() if past_key_values is not None else 0
            position_ids = torch.arange(past, past + input_ids.shape[1], device=input_ids.device)[None]
        mask = create_causal_mask(
            config=self.config,
            inputs_embeds=embeddings,
            attention_mask=attention_mask,
            past_key_values=past_key_values,
            position_ids=position_ids,
        )
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        hidden_states = self.midlayer(embeddings, hidden_states, position_embeddings, mask, past_key_values)
        for layer in self.layers.values():
            hidden_states = layer(
                hidden_states, attention_mask=mask, position_ids=position_ids, past_key_values=past_key_values,
                position_embeddings=position_embeddings,
            )
        if not compute_logits:
            return Eagle3DraftOutput(prenorm_hidden_states=hidden_states)
        if logits_index is not None:
            kept = hidden_states[logits_index]
        else:
            kept = hidden_states[:, -logits_to_keep:] if logits_to_keep else hidden_states
        return Eagle3DraftOutput(logits=self.lm_head(self.norm(kept)), prenorm_hidden_states=hidden_states)

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: str | os.PathLike,
        *,
        target: PreTrainedModel,
        allow_pickle: bool = False,
        ignore_target_mismatch: bool = False,
        revision: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        force_download: bool = False,
        local_files_only: bool = False,
        token: str | bool | None = None,
        dtype: torch.dtype | str | None = None,
        subfolder: str | None = None,
        **kwargs,
    ) -> Eagle3DraftModel:
        """Load an official EAGLE-3 or SpecForge checkpoint for ``target`` (``checkpoint.load_checkpoint``), in
        ``dtype`` (default: the target's; a name, or ``"auto"`` for the dtype it was saved in); the checkpoint sets
        the drafter (no config keywords). The checks are :class:`Eagle3Drafter`'s ``from_pretrained``'s (a folder of
        another kind named with its loader; transformers' keywords refused naming what to use)."""
        from .checkpoint import load_checkpoint
        from .drafter import Eagle3Drafter

        where = "Eagle3DraftModel.from_pretrained"
        location = ArtifactLocation(os.fspath(pretrained_model_name_or_path), revision=revision, cache_dir=cache_dir,
                                    force_download=force_download, token=token, local_files_only=local_files_only,
                                    subfolder=subfolder)
        options = dict(target=target, allow_pickle=allow_pickle, ignore_target_mismatch=ignore_target_mismatch,
                       dtype=dtype, **kwargs)
        Eagle3Drafter._check_load_keywords(options, where)
        Eagle3Drafter._check_location(location)
        return load_checkpoint(location, where=where, **options)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def save_pretrained(
        self,
        save_directory: str | os.PathLike,
        is_main_process: bool = True,
        state_dict: dict[str, torch.Tensor] | None = None,
        max_shard_size: int | str | None = None,
    ) -> None:
        """Write the SpecForge layout vLLM and SGLang load (see ``export.save_checkpoint``).

        The signature is the subset of ``PreTrainedModel.save_pretrained`` that ``Trainer`` and
        ``push_to_hub`` use; ``max_shard_size`` is ignored (one safetensors file).
        """
        from .export import save_checkpoint

        if is_main_process:
            save_checkpoint(self, save_directory, state_dict)


def _mark_loaded_embeddings(module: Eagle3DraftModel, incompatible_keys) -> None:
    """``load_state_dict`` post-hook: embeddings count as set once a state dict provided them. A state dict without
    them (the SpecForge layout leaves them out at the target's width: a ``Trainer`` checkpoint) keeps embeddings
    already set from the target, and does not call them missing; they stay missing where none were ever set."""
    if "embed_tokens.weight" not in incompatible_keys.missing_keys:
        module.embeddings_ready = True
    elif module.embeddings_ready:
        incompatible_keys.missing_keys.remove("embed_tokens.weight")
