"""The catalogue of bad inputs: each row is something a user can get wrong and the error it must
raise, naming the problem and the fix. README "Supported, and refused" links here.

Areas with catalogues of their own, next to their subject:
- EAGLE-3 checkpoints: ``LOADING_ERRORS`` in tests/eagle3/test_eagle3_checkpoint.py;
- the static cache and compiled path: tests/test_static_cache.py;
- hub artifacts (types, files, weights): tests/hub/test_local_artifacts.py;
- concurrent calls: tests/test_concurrency.py;
- policy settings changed after construction: ``CHANGED_SINCE`` in tests/policies/test_settings_checked.py;
- a cache reused for another prompt: tests/test_cache_continuation.py;
- training-mode targets: tests/test_generate_integration.py (the checkpointed draft model is here);
- DVI and EAGLE-3 drafters' own settings beyond those here: tests/dvi/, tests/eagle3/;
- training scripts and their data: tests/training/, tests/training_data/.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from tiny_models import make_char_tokenizer, prompt, tiny_eagle3, tiny_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

import hf_adaptive_spec as hfas
from hf_adaptive_spec.bench.cli import main as bench_main
from hf_adaptive_spec.core import FeatureCapture
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.hub import ArtifactError, ArtifactTypeError, MissingArtifactFileError


@dataclass
class BadInput:
    """``call(llama, tmp_path)`` must raise ``error`` with a message matching ``message``."""

    call: Callable[[LlamaForCausalLM, Path], object]
    error: type[Exception]
    message: str


def _generate(model, ids=None, **kwargs):
    kwargs.setdefault("assistant_model", hfas.CausalLMDrafter(model))
    kwargs.setdefault("assistant_policy", hfas.StaticTreePolicy.chain(3))
    return model.generate(prompt(5) if ids is None else ids, max_new_tokens=5, do_sample=False, **kwargs)


def _resized(model):
    model.resize_token_embeddings(model.config.vocab_size + 32)
    return model


def _dvi_sharing_on_scaled_logits(model, tmp_path):
    """A Granite target (logits scaled after lm_head) with DVI sharing by default: it cannot verify through the
    shared layers; the error named no argument to turn sharing off, which the user never turned on."""
    from transformers import GraniteConfig, GraniteForCausalLM

    torch.manual_seed(0)
    config = GraniteConfig(vocab_size=model.config.vocab_size, hidden_size=64, intermediate_size=128,
                           num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, logits_scaling=4.0)
    granite = hfas.enable(GraniteForCausalLM(config).eval())
    return _generate(granite, assistant_model=hfas.DVIDrafter(granite, exit_layer=2))


def _tiny_t5(vocab_size: int):
    from transformers import T5Config, T5ForConditionalGeneration

    return T5ForConditionalGeneration(T5Config(vocab_size=vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=1,
                                               num_heads=2, decoder_start_token_id=0))


def _two_prompts() -> torch.LongTensor:
    return torch.cat([prompt(5), prompt(5, seed=1)])


def _prefilled_cache(model, length: int) -> DynamicCache:
    cache = DynamicCache(config=model.config)
    model(prompt(length), past_key_values=cache, use_cache=True)
    return cache


class _FeatureReadingDrafter(hfas.Drafter):
    """A third-party drafter that reads target features and says nothing about continuing from a cache."""

    feature_layers = (2,)

    def bind(self, target):
        pass

    def begin_tree(self, context):
        raise AssertionError("refused before drafting")

    def expand(self, tree, nodes):
        raise AssertionError("refused before drafting")


def _flash_attention_target(model, tmp_path):
    flash = tiny_model("llama")
    flash.config._attn_implementation = "flash_attention_2"
    return _generate(flash, assistant_model=hfas.CausalLMDrafter(tiny_model("llama", seed=1)))


class _ImageTakingLlama(LlamaForCausalLM):
    """Takes ``pixel_values`` as a multimodal target does, so that generate hands them to the decoding loop."""

    def forward(self, *args, pixel_values=None, **kwargs):
        return super().forward(*args, **kwargs)


def _image_input(model, tmp_path):
    """A model input the engine would not feed the target: refused, never dropped."""
    target = hfas.enable(_ImageTakingLlama(model.config).eval())
    return _generate(target, pixel_values=torch.zeros(1, 3, 4, 4))


def _load_saved_drafter(kind: str, **kwargs):
    """Save a drafter of ``kind`` for the tiny target, then load it with ``kwargs``."""
    def call(model, tmp_path):
        if kind == "eagle3":
            hfas.Eagle3Drafter(Eagle3DraftModel.from_target(model)).save_pretrained(tmp_path / kind)
            return hfas.Eagle3Drafter.from_pretrained(tmp_path / kind, target=model, **kwargs)
        hfas.DVIDrafter(model, exit_layer=2).save_pretrained(tmp_path / kind)
        return hfas.DVIDrafter.from_pretrained(tmp_path / kind, target=model, **kwargs)

    return call


def _reordered_char_tokenizer() -> PreTrainedTokenizerFast:
    """A tokenizer of the same size as the tiny models' with two tokens' ids swapped: another vocabulary."""
    vocab = make_char_tokenizer().get_vocab()
    first, second = sorted(vocab, key=vocab.get)[1:3]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>")


def _not_enabled(model, tmp_path):
    plain = LlamaForCausalLM(model.config).eval()
    return plain.generate(prompt(5), max_new_tokens=3, assistant_policy=hfas.StaticTreePolicy.chain(2))


def _alibi_target(model, tmp_path):
    """Falcon with ALiBi: its biases come from the attention mask's layout, so tree nodes would not get their depths."""
    from transformers import FalconConfig, FalconForCausalLM

    torch.manual_seed(0)
    falcon = hfas.enable(FalconForCausalLM(FalconConfig(vocab_size=96, hidden_size=64, num_hidden_layers=2,
                                                        num_attention_heads=4, alibi=True)).eval())
    return falcon.generate(prompt(5), max_new_tokens=3, assistant_model=hfas.CausalLMDrafter(falcon),
                           assistant_policy=hfas.StaticTreePolicy.chain(2))


def _chunked_attention_target(model, tmp_path):
    """Layers of another kind than full or sliding attention (Llama 4's chunked attention, a recurrent layer): a
    chunked layer got the full causal mask (found by a review)."""
    import copy

    config = copy.deepcopy(model.config)
    config.layer_types = ["full_attention", "chunked_attention"] * (config.num_hidden_layers // 2)
    target = hfas.enable(LlamaForCausalLM(config).eval())
    return target.generate(prompt(5), max_new_tokens=3, assistant_model=hfas.CausalLMDrafter(target),
                           assistant_policy=hfas.StaticTreePolicy.chain(2))


def _bloom_target(model, tmp_path):
    """BLOOM: ALiBi by model type (no ``alibi`` option to read), refused as Falcon's ``alibi=True`` is."""
    from transformers import BloomConfig, BloomForCausalLM

    torch.manual_seed(0)
    bloom = hfas.enable(BloomForCausalLM(BloomConfig(vocab_size=96, hidden_size=64, n_layer=2, n_head=4)).eval())
    return _generate(bloom)


def _checkpointed_draft_model(model, tmp_path):
    """A separate draft model in training mode with gradient checkpointing: transformers runs it without its cache."""
    draft = tiny_model("llama", seed=3, num_hidden_layers=2)
    draft.activation_checkpointing_enable() if hasattr(draft, "activation_checkpointing_enable") else (
        draft.gradient_checkpointing_enable())
    return _generate(model, assistant_model=draft.train())


def _quantized_cache(model, tmp_path):
    from transformers import QuantizedCache

    return _generate(model, past_key_values=QuantizedCache("fp8", model.config))


def _linear_attention_cache_layer(model, tmp_path):
    from transformers.cache_utils import LinearAttentionLayer

    cache = DynamicCache(config=model.config)
    cache.layers[0] = LinearAttentionLayer()
    return _generate(model, past_key_values=cache)


class _BadConfigPolicy(hfas.DraftPolicy):
    def tree_config(self, state):
        return hfas.TreeConfig(depth=3, top_k=0, total_tokens=4)


class _NotAConfigPolicy(hfas.DraftPolicy):
    def tree_config(self, state):
        return {"depth": 3}


class _BadSizePolicy(hfas.StaticTreePolicy):
    def num_tokens_to_verify(self, info):
        return -1


class _BadStopPolicy(hfas.StaticTreePolicy):
    def continue_drafting(self, step):
        return None


GENERATE = {
    "batch-larger-than-one": BadInput(lambda m, t: _generate(m, ids=_two_prompts()), ValueError, "batch size 1"),
    "beam-search-named-before-batch-size": BadInput(
        lambda m, t: _generate(m, ids=_two_prompts(), num_beams=2), ValueError, "beam search"
    ),
    "drafter-vocabulary-mismatch": BadInput(
        lambda m, t: _generate(m, assistant_model=LlamaForCausalLM(LlamaConfig(
            vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=1)).eval()),
        ValueError,
        r"vocab_size \(50\) differs from the target's \(96\).*the target's tokenizer.*differ in padding alone.*"
        r"resize_token_embeddings\(96\)",
    ),
    "assistant-tokenizer-of-another-vocabulary": BadInput(
        lambda m, t: _generate(m, tokenizer=make_char_tokenizer(), assistant_tokenizer=_reordered_char_tokenizer()),
        ValueError,
        r"assistant_tokenizer= has another vocabulary than tokenizer=.*universal assisted generation: assistant_model= "
        r"with tokenizer= and assistant_tokenizer=, without assistant_policy",
    ),
    "assistant-tokenizer-without-tokenizer": BadInput(
        lambda m, t: _generate(m, assistant_tokenizer=make_char_tokenizer()), ValueError,
        r"assistant_tokenizer= needs tokenizer= \(the target's\).*universal assisted generation",
    ),
    "attention-kernel-without-tree-masks": BadInput(
        _flash_attention_target, ValueError, "attn_implementation='sdpa'.*Supported: sdpa, eager"
    ),
    "cache-implementation-offloaded": BadInput(
        lambda m, t: _generate(m, cache_implementation="offloaded"), ValueError,
        "supports cache_implementation='static' or 'dynamic'",
    ),
    "ensemble-verification": BadInput(  # transformers' lossy ensemble weight was dropped without a word
        lambda m, t: _generate(m, assistant_ensemble_weight=0.3), ValueError,
        r"lossless tree speculation, and this call asks for assistant_ensemble_weight=0.3 \(verification against a "
        r"mix of the target's and the drafter's distributions \(lossy\)\): drop it",
    ),
    "another-speculation-type": BadInput(  # dropped without a word
        lambda m, t: _generate(m, speculation_type="dflash"), ValueError,
        r"asks for speculation_type='dflash' \(transformers' own speculation of that type\): drop it",
    ),
    "synced-gpus": BadInput(  # dropped without a word: ranks of a sharded model would stop stepping together
        lambda m, t: _generate(m, synced_gpus=True), ValueError,
        r"does not run with synced_gpus \(a model sharded over several ranks by DeepSpeed ZeRO-3 or FSDP.*Generate "
        r"with a model each rank holds whole, or drop assistant_policy",
    ),
    "static-cache-length-not-a-count": BadInput(
        lambda m, t: _generate(m, cache_implementation="static", max_cache_len=64.5), ValueError,
        r"generate: max_cache_len must be an int \(the static cache's slots, at least\), got 64.5",
    ),
    "static-cache-request-and-a-cache": BadInput(
        lambda m, t: _generate(m, cache_implementation="static", past_key_values=DynamicCache()), ValueError,
        "either cache_implementation='static' or a past_key_values cache, not both",
    ),
    "cache-holding-the-whole-input": BadInput(
        lambda m, t: _generate(m, past_key_values=_prefilled_cache(m, 5)), ValueError,
        "already holds 5 tokens, but input_ids has 5: .* pass the whole sequence",
    ),
    "new-tokens-only-after-a-cache": BadInput(
        lambda m, t: _generate(m, ids=prompt(2), attention_mask=torch.ones(1, 5, dtype=torch.long),
                               past_key_values=_prefilled_cache(m, 3)),
        ValueError, "input_ids has 2 tokens, but (attention_mask|position_ids).* covers 5: .* pass the whole sequence",
    ),
    "encoder-decoder-drafter": BadInput(  # T5 can generate: it passed, then failed inside the first draft
        lambda m, t: hfas.CausalLMDrafter(_tiny_t5(m.config.vocab_size)), ValueError,
        "CausalLMDrafter needs a decoder-only causal LM; T5ForConditionalGeneration is an encoder-decoder model",
    ),
    "dvi-default-sharing-on-scaled-logits": BadInput(
        _dvi_sharing_on_scaled_logits, ValueError,
        r"logits are not lm_head\(final norm\) \(softcapping or scaling\): pass share_cache=False to DVIDrafter",
    ),
    "mask-shorter-than-the-prompt": BadInput(  # stock: a tensor-size RuntimeError from inside attention
        lambda m, t: _generate(m, ids=prompt(7), attention_mask=torch.ones(1, 5, dtype=torch.long)), ValueError,
        r"input_ids has 7 tokens, but position_ids \(generate makes them from an attention_mask\) covers 5",
    ),
    "empty-prompt": BadInput(  # named a past_key_values that "already holds 0 tokens"
        lambda m, t: _generate(m, ids=torch.zeros(1, 0, dtype=torch.long)), ValueError,
        "input_ids holds no token: assistant_policy decodes after a prompt of at least one token",
    ),
    "feature-reading-drafter-continuing-from-a-cache": BadInput(
        lambda m, t: _generate(m, past_key_values=_prefilled_cache(m, 3), assistant_model=_FeatureReadingDrafter()),
        ValueError, "_FeatureReadingDrafter reads the target's hidden states .* holding 3 tokens.*continue_after",
    ),
    "policy-top-k-zero": BadInput(
        lambda m, t: _generate(m, assistant_policy=_BadConfigPolicy()), ValueError,
        "TreeConfig.top_k must be an int >= 1",
    ),
    "policy-config-not-a-tree-config": BadInput(
        lambda m, t: _generate(m, assistant_policy=_NotAConfigPolicy()), ValueError,
        "tree_config returned .* expected a TreeConfig",
    ),
    "policy-negative-verify-size": BadInput(
        lambda m, t: _generate(m, assistant_policy=_BadSizePolicy(depth=3, top_k=2, total_tokens=5)), ValueError,
        "num_tokens_to_verify returned -1",
    ),
    "policy-stop-not-a-bool": BadInput(
        lambda m, t: _generate(m, assistant_policy=_BadStopPolicy(depth=3, top_k=2, total_tokens=5)), ValueError,
        "continue_drafting returned None",
    ),
    "policy-not-a-draft-policy": BadInput(
        lambda m, t: _generate(m, assistant_policy="static"), ValueError, "assistant_policy must be a DraftPolicy"
    ),
    "drafting-policy-without-drafter": BadInput(
        lambda m, t: _generate(m, assistant_model=None), ValueError, "got no assistant_model"
    ),
    "assistant-model-of-the-wrong-type": BadInput(
        lambda m, t: _generate(m, assistant_model="smollm2"), ValueError, "assistant_model must be a drafter"
    ),
    "assistant-model-compiled": BadInput(  # named only 'got OptimizedModule'
        lambda m, t: _generate(m, assistant_model=torch.compile(tiny_model("llama", seed=3, num_hidden_layers=1))),
        ValueError, r"assistant_model is a torch.compile'd LlamaForCausalLM: pass the model itself .*_orig_mod",
    ),
    "eagle3-after-the-target-was-resized": BadInput(  # said only that the drafter must share the tokenizer
        lambda m, t: _generate(_resized(tiny_model("llama")), assistant_model=tiny_eagle3(tiny_model("llama"))),
        ValueError, r"vocab_size is 96, the target's is 128.*embeddings resized with resize_token_embeddings",
    ),
    "drafter-without-policy": BadInput(
        lambda m, t: m.generate(prompt(5), max_new_tokens=5, assistant_model=hfas.CausalLMDrafter(m)), ValueError,
        "needs a policy",
    ),
    "alibi-target": BadInput(_alibi_target, ValueError, r"\(falcon\) uses ALiBi position biases"),
    "chunked-attention-target": BadInput(
        _chunked_attention_target, ValueError, r"\(llama\) has layers of kind \['chunked_attention'\]"
    ),
    "padded-input": BadInput(
        lambda m, t: _generate(m, attention_mask=torch.tensor([[0, 1, 1, 1, 1]])), ValueError, "padded inputs"
    ),
    "assistant-policy-without-enable": BadInput(
        _not_enabled, ValueError, r"assistant_policy belongs to hf_adaptive_spec: call hf_adaptive_spec.enable\(model\)"
    ),
    "prompt-lookup-tokens-negative": BadInput(
        lambda m, t: _generate(m, assistant_model=None, assistant_policy=hfas.StaticTreePolicy(depth=0, top_k=1,
                               total_tokens=1), prompt_lookup_num_tokens=-1),
        ValueError, "must be a positive integer",
    ),
    "prompt-lookup-ngram-zero": BadInput(
        lambda m, t: _generate(m, prompt_lookup_num_tokens=2, max_matching_ngram_size=0), ValueError,
        "must be a positive integer",
    ),
    "prompt-lookup-ngram-negative": BadInput(
        lambda m, t: _generate(m, prompt_lookup_num_tokens=2, max_matching_ngram_size=-2), ValueError,
        "must be a positive integer",
    ),
    "inputs-embeds": BadInput(
        lambda m, t: m.generate(inputs_embeds=m.get_input_embeddings()(prompt(5)), max_new_tokens=4,
                                assistant_model=hfas.CausalLMDrafter(m),
                                assistant_policy=hfas.StaticTreePolicy.chain(2)),
        ValueError, "needs input_ids, not inputs_embeds",
    ),
    "output-attentions": BadInput(
        lambda m, t: _generate(m, output_attentions=True, return_dict_in_generate=True), ValueError,
        "does not return attentions or hidden states",
    ),
    "output-hidden-states": BadInput(
        lambda m, t: _generate(m, output_hidden_states=True, return_dict_in_generate=True), ValueError,
        "does not return attentions or hidden states",
    ),
    "num-return-sequences": BadInput(
        lambda m, t: m.generate(prompt(5), max_new_tokens=4, num_return_sequences=2, do_sample=True,
                                assistant_model=hfas.CausalLMDrafter(m),
                                assistant_policy=hfas.StaticTreePolicy.chain(2)),
        ValueError, r"returns one sequence per call \(num_return_sequences=2\): call generate once per sequence",
    ),
    "prompt-lookup-with-a-cache-sharing-drafter": BadInput(
        lambda m, t: _generate(m, assistant_model=hfas.DVIDrafter(tiny_model("llama"), exit_layer=1),
                               prompt_lookup_num_tokens=2),
        ValueError, "drop prompt_lookup_num_tokens, or pass share_cache=False to DVIDrafter",
    ),
    "truncated-drafter-too-deep": BadInput(
        lambda m, t: hfas.CausalLMDrafter.from_target_layers(m, 4), ValueError, "num_layers must be an int in 1..3"
    ),
    "feature-index-out-of-range": BadInput(
        lambda m, t: FeatureCapture(m, [5]), ValueError, "out of range for a 4-layer model"
    ),
    "pad-token-inside-an-unpadded-prompt": BadInput(
        lambda m, t: _generate(m, ids=torch.tensor([[5, 7, 3, 7, 9]]), pad_token_id=7), ValueError,
        r"padded inputs .*attention_mask=torch.ones_like\(input_ids\)",
    ),
    "shifted-position-ids": BadInput(
        lambda m, t: _generate(m, position_ids=torch.arange(5)[None] + 3), ValueError,
        "position_ids lay the prompt out otherwise",
    ),
    "packed-position-ids": BadInput(
        lambda m, t: _generate(m, position_ids=torch.tensor([[0, 1, 2, 0, 1]])), ValueError,
        "position_ids lay the prompt out otherwise",
    ),
    "a-model-input-the-engine-would-drop": BadInput(
        _image_input, ValueError, r"would not pass on \['pixel_values'\]: it supports text-only",
    ),
    "contrastive-search": BadInput(
        lambda m, t: _generate(m, penalty_alpha=0.6, top_k=4), ValueError, "asks for contrastive_search"
    ),
    "dola": BadInput(lambda m, t: _generate(m, dola_layers="high"), ValueError, "asks for dola_generation"),
    "transformers-early-exit-drafter": BadInput(
        lambda m, t: _generate(m, assistant_early_exit=2), ValueError,
        r"asks for assisted_generation \(assistant_early_exit\): drop it, or drop assistant_policy",
    ),
    "transformers-mtp-drafter": BadInput(
        lambda m, t: _generate(m, use_mtp=True), ValueError,
        r"asks for assisted_generation \(use_mtp\): drop it, or drop assistant_policy",
    ),
    "constraints": BadInput(  # any constraint object: generate hands it on unread until the decoding mode is chosen
        lambda m, t: _generate(m, constraints=[object()]), ValueError,
        r"asks for constrained_beam_search \(constraints\): drop it",
    ),
    "alibi-by-model-type": BadInput(_bloom_target, ValueError, r"\(bloom\) uses ALiBi position biases"),
    "draft-model-training-with-gradient-checkpointing": BadInput(
        _checkpointed_draft_model, ValueError,
        r"draft model \(LlamaForCausalLM\) is in training mode with gradient checkpointing.*call model.eval\(\)",
    ),
    "quantized-cache": BadInput(
        _quantized_cache, ValueError, r"supports a DynamicCache or a StaticCache, got QuantizedCache: pass one of"
    ),
    "linear-attention-cache-layer": BadInput(
        _linear_attention_cache_layer, ValueError,
        r"Cache layer 0 is a LinearAttentionLayer.*: pass a cache built from this model.s config",
    ),
    "forced-words": BadInput(
        lambda m, t: _generate(m, force_words_ids=[[3]]), ValueError, "asks for constrained_beam_search"
    ),
    "token-healing": BadInput(
        lambda m, t: _generate(m, token_healing=True), ValueError, r"heal the prompt first.*model.heal_tokens"
    ),
    # drafters' settings read by their truth, accepted and ignored, or failing raw (audit helper-104)
    "dvi-loaded-with-online-as-a-string": BadInput(  # online="no" learned
        _load_saved_drafter("dvi", online="no"), ValueError, r"DVIDrafter: online must be True or False, got 'no'",
    ),
    "eagle3-loaded-with-ignore-target-mismatch-as-a-string": BadInput(  # "no" loaded onto another depth
        _load_saved_drafter("eagle3", ignore_target_mismatch="no"), ValueError,
        r"Eagle3Drafter.from_pretrained: ignore_target_mismatch must be True or False, got 'no'",
    ),
    "dvi-online-config-without-online": BadInput(  # accepted and ignored
        lambda m, t: hfas.DVIDrafter(m, 2, online_config=hfas.DVIOnlineLearnerConfig()), ValueError,
        r"online_config sets the online learner, and online=False learns nothing.*pass online=True with it",
    ),
    "dvi-online-config-as-a-dict": BadInput(  # an AttributeError inside the learner
        lambda m, t: hfas.DVIDrafter(m, 2, online=True, online_config={"learning_rate": 1e-3}), ValueError,
        r"online_config must be a DVIOnlineLearnerConfig, got \{'learning_rate': 0.001\}.*"
        r"DVIOnlineLearnerConfig\(\*\*settings\)",
    ),
    "dvi-share-cache-set-to-a-string": BadInput(  # "no" is truthy: sharing stayed on
        lambda m, t: setattr(hfas.DVIDrafter(m, 2, share_cache=False), "share_cache", "no"), ValueError,
        r"DVIDrafter: share_cache must be True or False, got 'no'",
    ),
    "dvi-share-cache-set-on-sliding-layers": BadInput(  # the constructor refused it; set later, a raw RuntimeError
        lambda m, t: setattr(hfas.DVIDrafter(tiny_model("mistral-sliding"), 2), "share_cache", True), ValueError,
        r"DVIDrafter\(share_cache=True\) needs full attention in the shared layers, but layers \[0, 1\] use a "
        r"sliding window",
    ),
    "eagle3-feature-layers-set": BadInput(  # ignored (the model reads its config's), or a raw KeyError
        lambda m, t: setattr(hfas.Eagle3Drafter(Eagle3DraftModel.from_target(m)), "feature_layers", (3, 2, 1)),
        ValueError, r"Eagle3Drafter.feature_layers follow the checkpoint's aux_hidden_state_layer_ids",
    ),
    "eagle3-layers-as-a-float": BadInput(  # a raw TypeError in range()
        lambda m, t: Eagle3DraftModel.from_target(m, num_hidden_layers=2.0), ValueError,
        r"Eagle3DrafterConfig: num_hidden_layers must be an int",
    ),
    "eagle3-feature-layer-as-a-bool": BadInput(  # read as layer 1
        lambda m, t: Eagle3DraftModel.from_target(m, aux_hidden_state_layer_ids=[True, 2, 3]), ValueError,
        r"aux_hidden_state_layer_ids must be ints \(indices into the target's hidden_states\), got \[True, 2, 3\]",
    ),
    "early-exit-layers-as-text": BadInput(  # a raw TypeError in a comparison
        lambda m, t: hfas.CausalLMDrafter.from_target_layers(m, "2"), ValueError,
        r"num_layers must be an int in 1..3 for a 4-layer target, got '2'",
    ),
    "eagle3-drafter-loaded-with-a-misspelt-keyword": BadInput(
        _load_saved_drafter("eagle3", alow_pickle=True), TypeError,
        r"Eagle3Drafter.from_pretrained does not take \['alow_pickle'\]",
    ),
    "eagle3-drafter-loaded-with-a-dtype": BadInput(
        _load_saved_drafter("eagle3", torch_dtype=torch.bfloat16), TypeError,
        r"does not take \['torch_dtype'\]: it takes \['allow_pickle', 'dtype', 'ignore_target_mismatch', 'target'\]"
        r".*For torch_dtype=, pass dtype= instead",
    ),
    "eagle3-drafter-loaded-with-its-own-saved-dtype": BadInput(  # equal to config.json's, and still not obeyed
        _load_saved_drafter("eagle3", torch_dtype="float32", ignore_target_mismatch=False), TypeError,
        r"does not take \['torch_dtype'\]",
    ),
    "dvi-drafter-loaded-with-another-exit-layer": BadInput(
        _load_saved_drafter("dvi", exit_layer=1), TypeError,
        r"DVIDrafter.from_pretrained does not take \['exit_layer'\]",
    ),
    "bare-eagle3-network-as-assistant-model": BadInput(
        lambda m, t: _generate(m, assistant_model=Eagle3DraftModel.from_target(m)), ValueError,
        r"Eagle3DraftModel, a network that cannot generate on its own.*Eagle3Drafter\(model\)",
    ),
}


def _missing(loader: str, name: str) -> BadInput:
    def call(model, tmp_path):
        if loader == "policy":
            return hfas.AutoDraftPolicy.from_pretrained(name)
        return hfas.Eagle3Drafter.from_pretrained(name, target=model)

    return BadInput(call, MissingArtifactFileError, f"No such folder: '{name}'")


def _missing_like_a_repo_id(loader: str) -> BadInput:
    """'artifacts/x' reads as a repo id too: offline, the error names the missing folder as well as the Hub's side."""
    name = "artifacts/hfas-no-such-artifact"

    def call(model, tmp_path):
        hub = {"cache_dir": tmp_path, "local_files_only": True}
        if loader == "policy":
            return hfas.AutoDraftPolicy.from_pretrained(name, **hub)
        return hfas.Eagle3Drafter.from_pretrained(name, target=model, **hub)

    return BadInput(call, MissingArtifactFileError, f"No local folder '{name}' exists either")


def _saved_eagle3(model, folder: Path) -> Path:
    hfas.Eagle3Drafter(Eagle3DraftModel.from_target(model)).save_pretrained(folder)
    return folder


def _truncated_eagle3_weights(model, tmp_path):
    folder = _saved_eagle3(model, tmp_path)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    return hfas.Eagle3Drafter.from_pretrained(folder, target=model)


def _drafter_from_a_folder_of_another_kind(drafter: str, kind: str):
    """A drafter loaded from the target's own folder, or from a policy's."""
    def call(model, tmp_path):
        if kind == "model":
            model.save_pretrained(tmp_path)
        elif kind == "one-layer model":
            tiny_model("llama", num_hidden_layers=1).save_pretrained(tmp_path)
        else:
            hfas.StaticTreePolicy.chain(2).save_pretrained(tmp_path)
        loader = hfas.Eagle3Drafter if drafter == "eagle3" else hfas.DVIDrafter
        return loader.from_pretrained(tmp_path, target=model)

    return call


def _eagle3_config(text: str):
    def call(model, tmp_path):
        (_saved_eagle3(model, tmp_path) / "config.json").write_text(text)
        return hfas.Eagle3Drafter.from_pretrained(tmp_path, target=model)

    return call


def _eagle3_config_edited(**fields):
    def call(model, tmp_path):
        config = _saved_eagle3(model, tmp_path) / "config.json"
        config.write_text(json.dumps({**json.loads(config.read_text()), **fields}))
        return hfas.Eagle3Drafter.from_pretrained(tmp_path, target=model)

    return call


def _damaged_dvi_adapter(damage: str):
    """A DVI adapter folder with its adapter_config.json cut in half, or without config.json."""
    def call(model, tmp_path):
        hfas.DVIDrafter(model, exit_layer=2).save_pretrained(tmp_path)
        if damage == "truncated adapter config":
            text = (tmp_path / "adapter_config.json").read_text()
            (tmp_path / "adapter_config.json").write_text(text[: len(text) // 2])
        else:
            (tmp_path / "config.json").unlink()
        return hfas.DVIDrafter.from_pretrained(tmp_path, target=model)

    return call


def _dvi_adapter_as_policy(model, tmp_path):
    hfas.DVIDrafter(tiny_model("llama"), exit_layer=1).save_pretrained(tmp_path)
    return hfas.AutoDraftPolicy.from_pretrained(tmp_path)


def _legacy_dvi_adapter_as_policy(model, tmp_path):
    """A DVI adapter saved before adapters wrote config.json (dvi_config.json instead)."""
    hfas.DVIDrafter(tiny_model("llama"), exit_layer=1).save_pretrained(tmp_path)
    (tmp_path / "config.json").rename(tmp_path / "dvi_config.json")
    return hfas.AutoDraftPolicy.from_pretrained(tmp_path)


def _eagle3_as_policy(model, tmp_path):
    return hfas.AutoDraftPolicy.from_pretrained(_saved_eagle3(model, tmp_path))


FOLDERS = {
    **{
        f"missing-folder-{loader}-{kind}": _missing(loader, name)
        for loader in ("policy", "eagle3")
        for kind, name in (("relative", "./no/such/folder"), ("absolute", "/tmp/hfas-no-such-folder"),
                           ("like-a-repo-id", "a/b/c"))
    },
    **{f"missing-folder-{loader}-one-slash": _missing_like_a_repo_id(loader) for loader in ("policy", "eagle3")},
    "dvi-adapter-given-as-a-policy": BadInput(
        _dvi_adapter_as_policy, ArtifactTypeError,
        r"\(DVIDrafter\), which is not a DraftPolicy.*Load it with DVIDrafter.from_pretrained\(path, target=model\)",
    ),
    "legacy-dvi-adapter-given-as-a-policy": BadInput(
        _legacy_dvi_adapter_as_policy, ArtifactTypeError,
        r"has no 'config.json': it is a DVI adapter: load it with DVIDrafter",
    ),
    "eagle3-drafter-given-as-a-policy": BadInput(
        _eagle3_as_policy, ArtifactTypeError, r"not an hf-adaptive-spec artifact; it looks like an EAGLE-3 drafter"
    ),
    "eagle3-from-a-causal-lm-folder": BadInput(
        _drafter_from_a_folder_of_another_kind("eagle3", "model"), ArtifactError,
        r"holds a causal language model \(config.json: architectures \['LlamaForCausalLM'\], 4 layers, none of "
        r"EAGLE-3's fields.*not an EAGLE-3 drafter: load it with AutoModelForCausalLM",
    ),
    "eagle3-from-a-one-layer-causal-lm-folder": BadInput(  # one layer, as official EAGLE-3 configs: told by weights
        _drafter_from_a_folder_of_another_kind("eagle3", "one-layer model"), ArtifactError,
        r"holds a causal language model \(model.layers.\* weights, no fc.weight\), not an EAGLE-3 drafter",
    ),
    "eagle3-from-a-policy-folder": BadInput(
        _drafter_from_a_folder_of_another_kind("eagle3", "policy"), ArtifactError,
        r"holds a 'hf_adaptive_spec.policy.static' artifact, not an EAGLE-3 drafter. Load it with",
    ),
    "dvi-from-a-policy-folder": BadInput(
        _drafter_from_a_folder_of_another_kind("dvi", "policy"), ArtifactError,
        r"declares 'hf_adaptive_spec.policy.static', not a DVI adapter .* Load it with",
    ),
    "truncated-safetensors": BadInput(
        _truncated_eagle3_weights, ArtifactError, r"model.safetensors' is not a readable safetensors file"
    ),
    "config-not-json": BadInput(_eagle3_config("{"), ArtifactError, r"config.json' is not valid JSON"),
    "eagle3-config-unknown-activation": BadInput(  # transformers' bare KeyError when the MLP was built
        _eagle3_config_edited(hidden_act="gelu_tanh_typo"), ValueError,
        r"hidden_act='gelu_tanh_typo' names no activation transformers knows .* fix hidden_act in the checkpoint",
    ),
    "dvi-truncated-adapter-config": BadInput(  # peft's bare JSONDecodeError
        _damaged_dvi_adapter("truncated adapter config"), ArtifactError,
        r"adapter_config.json' is not valid JSON .*save or download it again",
    ),
    "dvi-without-config": BadInput(  # named only the legacy dvi_config.json
        _damaged_dvi_adapter("no config"), ArtifactError,
        r"holds neither 'config.json' nor 'dvi_config.json' .* Save or download it again",
    ),
    "config-not-an-object": BadInput(_eagle3_config("[1, 2]"), ArtifactError, "must hold a JSON object, got list"),
}


class BenchRefused(Exception):
    """The bench CLI exited with status 2; the message is its stderr."""


def _bench(*args: str, turns: object = ("hi",)):
    def call(model, tmp_path):
        questions = tmp_path / "q.jsonl"
        questions.write_text(json.dumps({"question_id": 1, "category": "a", "turns": turns}) + "\n")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            status = bench_main(["--questions", str(questions), *args, "--no-progress"])
        if status == 2:
            raise BenchRefused(stderr.getvalue())
        return status

    return call


BENCH = {
    "bench-limit-negative": BadInput(_bench("--limit", "-1"), BenchRefused, "--limit must be at least 1, got -1"),
    "bench-limit-zero": BadInput(_bench("--limit", "0"), BenchRefused, "--limit must be at least 1, got 0"),
    "bench-per-category-zero": BadInput(
        _bench("--per-category", "0"), BenchRefused, "--per-category must be at least 1, got 0"
    ),
    "bench-max-new-tokens-zero": BadInput(
        _bench("--max-new-tokens", "0"), BenchRefused, "--max-new-tokens must be at least 1, got 0"
    ),
    "bench-num-threads-zero": BadInput(
        _bench("--num-threads", "0"), BenchRefused, "--num-threads must be at least 1, got 0"
    ),
    "bench-lookup-tokens-zero": BadInput(
        _bench("--lookup-tokens", "0"), BenchRefused, "--lookup-tokens must be at least 1, got 0"
    ),
    "bench-dvi-depth-zero": BadInput(  # a chain of 0: plain decoding under the dvi label
        _bench("--dvi-depth", "0"), BenchRefused, "--dvi-depth must be at least 1, got 0"
    ),
    "bench-num-assistant-tokens-zero": BadInput(
        _bench("--num-assistant-tokens", "0"), BenchRefused, "--num-assistant-tokens must be at least 1, got 0"
    ),
    "bench-no-method": BadInput(_bench("--methods", ","), BenchRefused, "--methods ',' names no method"),
    "bench-seed-negative": BadInput(_bench("--seed", "-5"), BenchRefused, r"--seed must be in \[0, 2\*\*32 - 1\]"),
    "bench-confidence-threshold-above-1": BadInput(  # transformers takes it: every draft would stop after one token
        _bench("--methods", "hf-assistant", "--assistant_confidence_threshold", "2.5"), BenchRefused,
        r"--assistant_confidence_threshold is a draft probability in \[0, 1\], got 2.5",
    ),
    "bench-drafter-layers-zero": BadInput(  # refused only after the model had loaded
        _bench("--methods", "tree", "--drafter_layers", "0"), BenchRefused, "--drafter-layers must be at least 1, got 0"
    ),
    "bench-temperature-nan": BadInput(
        _bench("--temperature", "nan"), BenchRefused, "--temperature must be 0 \\(greedy\\) or a finite positive number"
    ),
    "bench-turns-a-string": BadInput(
        _bench(turns="not a list"), BenchRefused, "q.jsonl:1: 'turns' must be a non-empty list of strings, got a str"
    ),
}

CATALOGUE = {**GENERATE, **FOLDERS, **BENCH}


@pytest.mark.parametrize("case", CATALOGUE.values(), ids=CATALOGUE.keys())
def test_bad_input_gets_its_error(llama, tmp_path, case):
    with pytest.raises(case.error, match=case.message):
        case.call(llama, tmp_path)


def test_a_model_sharded_over_several_ranks_is_refused_as_synced_gpus_is(llama, monkeypatch):
    """generate sets synced_gpus itself for a ZeRO-3 or FSDP model over several ranks, and never passes it to the
    engine's loop: the check resolves it as generate does."""
    import transformers.integrations.deepspeed as deepspeed

    monkeypatch.setattr(deepspeed, "is_deepspeed_zero3_enabled", lambda: True)
    _generate(llama)  # one rank: nothing to keep in step
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *args, **kwargs: 2)
    with pytest.raises(ValueError, match="does not run with synced_gpus"):
        _generate(llama)
    _generate(llama, synced_gpus=False)  # the caller's False stands, as in generate


def test_the_catalogue_has_at_least_40_entries():
    assert len(CATALOGUE) >= 40


class _FrontierLimit(hfas.CausalLMDrafter):
    """Fails at once when asked to expand more than ``limit`` nodes of one level."""

    limit = 7

    def expand(self, tree, nodes):
        assert len(nodes) <= self.limit, f"expanded {len(nodes)} beams of one level"
        return super().expand(tree, nodes)


def test_a_huge_top_k_drafts_no_more_than_total_tokens_can_verify(llama):
    """top_k=10**6 on a 96-token vocabulary used to grow 96**4 nodes (MemoryError after 30 s): beams
    past total_tokens - 1 are never verified, so they are not drafted; the tokens stay stock's."""
    policy = hfas.StaticTreePolicy(depth=4, top_k=10**6, total_tokens=8)
    drafter = _FrontierLimit(tiny_model("llama", seed=1))
    out = llama.generate(prompt(6), max_new_tokens=12, do_sample=False, assistant_model=drafter,
                         assistant_policy=policy)
    assert torch.equal(out, llama.generate(prompt(6), max_new_tokens=12, do_sample=False))


class _DraftedSizes(hfas.StaticTreePolicy):
    """Records the candidates of every draft level a cycle continues from, and every verified tree (a sampled tree
    is verified without num_tokens_to_verify, which would see the whole drafted tree)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.drafted: list[int] = []
        self.verified: list[int] = []

    def continue_drafting(self, step):
        self.drafted.append(len(step.step_scores))
        return super().continue_drafting(step)

    def observe(self, feedback):
        self.verified.append(feedback.verified_tokens)


def test_a_huge_top_k_samples_no_more_than_total_tokens_can_verify(llama):
    """The sampled twin: with sample_drafts=True the builder drew top_k=10**6 children per node (one
    multinomial of 10**6 draws, a 10**6-node tree, seconds per cycle) and then verified the root alone,
    since a sibling group larger than total_tokens - 1 never fits. The draw is clamped like the beams."""
    policy = _DraftedSizes(depth=4, top_k=10**6, total_tokens=8, sample_drafts=True)
    drafter = _FrontierLimit(tiny_model("llama", seed=1))
    torch.manual_seed(0)
    out = llama.generate(prompt(6), max_new_tokens=12, do_sample=True, assistant_model=drafter, assistant_policy=policy)
    assert out.shape[1] == 6 + 12
    assert policy.drafted and max(policy.drafted) <= 7, policy.drafted  # a level of at most total_tokens - 1
    assert max(policy.verified) <= 8 and max(policy.verified) > 1, policy.verified


def test_a_forward_compiled_without_the_capture_hooks_is_refused_naming_the_cause():
    """model.forward = torch.compile(model.forward), one stock call (traced without hooks), then the engine: dynamo
    does not check hooks added since, so the capture saw nothing and the engine failed with a bare KeyError: 4. Any
    backend traces the same way; 'eager' keeps the test fast. After torch._dynamo.reset() it decodes as stock."""
    model = tiny_model("llama")
    model.forward = torch.compile(model.forward, backend="eager")
    try:
        stock = model.generate(prompt(6), max_new_tokens=6, do_sample=False)
        drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
        with pytest.raises(RuntimeError, match=r"forward ran without hf_adaptive_spec's hooks \(hidden state 4 was "
                           r"not captured\).* torch._dynamo.reset\(\) before generate"):
            _generate(model, prompt(6), assistant_model=drafter)
        torch._dynamo.reset()
        assert torch.equal(_generate(model, prompt(6), assistant_model=drafter), stock[:, :11])
    finally:
        torch._dynamo.reset()
