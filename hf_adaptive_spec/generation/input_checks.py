"""What the decoding engine refuses before decoding: generate options and model inputs it would not honour.

Each refusal names the option or input and the fix, rather than decoding something other than what was asked.
"""

from __future__ import annotations

import copy

import torch
from transformers import GenerationConfig, PreTrainedModel
from transformers.generation.configuration_utils import GenerationMode
from transformers.utils import logging

from ..core.attention import check_tree_attention_support
from ..core.modes import check_inference_mode

logger = logging.get_logger(__name__)


def check_supported(
    model: PreTrainedModel, input_ids: torch.Tensor, config: GenerationConfig, model_kwargs: dict
) -> None:
    if (config.num_beams or 1) > 1:
        raise ValueError("assistant_policy cannot be combined with beam search (num_beams > 1): drop num_beams.")
    if (config.num_return_sequences or 1) > 1:
        raise ValueError(
            f"assistant_policy returns one sequence per call (num_return_sequences={config.num_return_sequences}): "
            "call generate once per sequence wanted, or drop assistant_policy."
        )
    if input_ids.shape[0] != 1:
        raise ValueError(
            f"assistant_policy supports batch size 1 only (got {input_ids.shape[0]} sequences): call generate once "
            "per prompt, or drop assistant_policy for batched stock generation."
        )
    if model.config.is_encoder_decoder:
        raise ValueError("assistant_policy supports decoder-only models only.")
    if config.return_dict_in_generate and (config.output_attentions or config.output_hidden_states):
        # without return_dict_in_generate, generate ignores them (and its config validation says so)
        raise ValueError(
            "assistant_policy does not return attentions or hidden states; "
            "drop output_attentions/output_hidden_states."
        )
    _check_decoding_mode(config)
    _check_no_other_speculation(config)
    _check_model_inputs(input_ids, model_kwargs)
    check_inference_mode(model, role="target model")
    check_tree_attention_support(model.config, role="target model")
    _warn_assisted_settings(config, model.generation_config)
    if config.prefill_chunk_size is not None:
        logger.warning_once(
            f"prefill_chunk_size={config.prefill_chunk_size} is not applied under assistant_policy: the engine "
            "prefills the prompt in one forward. The tokens are the same, but the prefill's peak memory is the whole "
            "prompt's: drop prefill_chunk_size, or drop assistant_policy for stock's chunked prefill."
        )


#: transformers' assisted-generation settings of the draft length, which ``assistant_policy`` decides instead
_ASSISTED_LENGTH_SETTINGS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold",
                             "assistant_lookbehind", "target_lookbehind")


def _warn_assisted_settings(config: GenerationConfig, model_config: GenerationConfig) -> None:
    """Warn once when the call itself sets transformers' draft-length settings (away from both transformers' defaults,
    which ``generate`` has filled in by now, and the model's ``generation_config``, which other methods of a run may
    set for transformers' own assisted generation): the policy decides the tree, and they would change nothing (the
    tokens are the same either way)."""
    defaults = getattr(GenerationConfig, "_get_default_generation_params", dict)()
    given = [name for name in _ASSISTED_LENGTH_SETTINGS
             if getattr(config, name, None) not in (defaults.get(name), getattr(model_config, name, None))]
    if given:
        transient = ", transient=True" if config.num_assistant_tokens_schedule == "heuristic_transient" else ""
        logger.warning_once(
            f"{', '.join(given)} set transformers' assisted generation, and assistant_policy decides the draft tree "
            "instead: they are not applied. Drop them; the policies ConfidenceThresholdPolicy(threshold=...) and "
            f"HeuristicLengthPolicy(initial_depth=...{transient}) are their equivalents."
        )


#: the options that make ``generate`` choose a decoding mode other than greedy search or sampling
_OTHER_DECODING_OPTIONS = (
    "assistant_early_exit", "use_mtp", "penalty_alpha", "dola_layers", "constraints", "force_words_ids"
)


def _check_decoding_mode(config: GenerationConfig) -> None:
    """Greedy decoding or sampling, the two the engine reproduces. ``generate`` leaves the others to its own
    decoding loops (or refuses them), and a ``custom_generate`` callable would otherwise ignore them."""
    base = copy.copy(config)
    base.prompt_lookup_num_tokens = None  # the engine's own lookup branch, not transformers' assisted mode
    mode = base.get_generation_mode()
    if mode not in (GenerationMode.GREEDY_SEARCH, GenerationMode.SAMPLE):
        asked = [name for name in _OTHER_DECODING_OPTIONS if getattr(config, name, None)]
        raise ValueError(
            f"assistant_policy decodes greedily or by sampling, but this call asks for {mode.value} "
            f"({', '.join(asked) or 'its options'}): drop {'them' if len(asked) > 1 else 'it'}, or drop "
            "assistant_policy (assistant_early_exit and use_mtp are transformers' own drafters: the assistant_model "
            "passed replaces them)."
        )


#: transformers' own speculation settings, each with what it asks for, which the engine's lossless tree speculation
#: does not do
_OTHER_SPECULATION = {
    "assistant_ensemble_weight": "verification against a mix of the target's and the drafter's distributions (lossy)",
    "speculation_type": "transformers' own speculation of that type",
}


def _check_no_other_speculation(config: GenerationConfig) -> None:
    """Refuse transformers' speculation settings the engine would otherwise drop without a word: the ensemble
    weight's tokens would follow another distribution than the one asked for."""
    asked = [f"{name}={getattr(config, name)!r} ({what})" for name, what in _OTHER_SPECULATION.items()
             if getattr(config, name, None) is not None]
    if asked:
        raise ValueError(
            f"assistant_policy runs its own lossless tree speculation, and this call asks for {'; '.join(asked)}: "
            "drop it (from the call, or the model's generation_config), or drop assistant_policy to use "
            "transformers' assisted generation."
        )


#: model inputs ``generate`` prepares for every decoder-only call; the engine feeds the target itself (the two
#: output flags come from the generation config, which ``check_supported`` reads)
_PREPARED_INPUTS = frozenset({"attention_mask", "past_key_values", "use_cache", "position_ids", "logits_to_keep",
                              "cache_position", "output_attentions", "output_hidden_states"})


def _check_model_inputs(input_ids: torch.Tensor, model_kwargs: dict) -> None:
    """The engine runs the target on token ids at positions 0, 1, 2, ...: inputs it would not pass on (images,
    embeddings, token types) or positions of another layout are refused, never dropped."""
    extra = sorted(name for name, value in model_kwargs.items() if value is not None and name not in _PREPARED_INPUTS)
    if "inputs_embeds" in extra:
        raise ValueError("assistant_policy needs input_ids, not inputs_embeds.")
    if extra:
        raise ValueError(
            f"assistant_policy runs the target on input_ids alone and would not pass on {extra}: it supports text-only "
            "decoder inputs. Drop those inputs, or drop assistant_policy to use stock generate."
        )
    if input_ids.shape[1] == 0:
        raise ValueError("input_ids holds no token: assistant_policy decodes after a prompt of at least one token.")
    for name in ("attention_mask", "position_ids"):  # generate builds position_ids from the caller's mask
        value = model_kwargs.get(name)
        if value is not None and value.shape[-1] != input_ids.shape[1]:
            named = "position_ids (generate makes them from an attention_mask)" if name == "position_ids" else name
            raise ValueError(
                f"input_ids has {input_ids.shape[1]} tokens, but {named} covers {value.shape[-1]}: give one entry per "
                "token of input_ids. To continue from a cache, assistant_policy takes the whole sequence as input_ids "
                "(the cached tokens, then the new ones), not the new tokens alone: pass the whole sequence."
            )
    mask = model_kwargs.get("attention_mask")
    if mask is not None and not bool(mask.all()):
        raise ValueError(
            "assistant_policy does not support padded inputs (the attention_mask has zeros; generate infers them "
            "where the prompt holds pad_token_id): pass the prompt without padding, or, if it has none but contains "
            "the pad token, attention_mask=torch.ones_like(input_ids)."
        )
    positions = model_kwargs.get("position_ids")
    if positions is not None and not torch.equal(positions.cpu(), torch.arange(input_ids.shape[1], device="cpu")[None]):
        raise ValueError(
            "assistant_policy decodes at positions 0, 1, 2, ... of the prompt and what follows, but position_ids "
            "lay the prompt out otherwise (shifted or packed): drop position_ids, or drop assistant_policy."
        )


def check_feature_layers(owner: object, role: str) -> None:
    """Refuse ``owner.feature_layers`` (a policy's or a drafter's: ``role``) unless it is a tuple or list of ints
    (transformers' ``hidden_states`` indices), before the call decodes anything."""
    layers = getattr(owner, "feature_layers", ())
    if isinstance(layers, (tuple, list)) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in layers
    ):
        return
    name = type(owner).__name__
    raise ValueError(
        f"The {role} {name} asks for target hidden states feature_layers={layers!r}; it must be a tuple (or list) "
        f"of ints, the hidden_states indices wanted (0: the embeddings' output, i: decoder layer i's): set "
        f"{name}.feature_layers = (i, ...), e.g. (2,) for one layer, or () for none."
    )
