"""``Eagle3DraftModel.from_target`` on targets whose configs do not use Llama's field names (GPT-2, Falcon)."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3Drafter, Eagle3DraftModel

from .conftest import TARGET_LAYERS, make_draft_model

DEFAULT_ROPE = {"rope_type": "default", "rope_theta": 10000.0}

#: the drafter's Llama fields each target's config gives (GPT-2: n_inner=None -> 4 x 64, no RoPE -> Llama's, no
#: key/value head count -> one per query head; Falcon's multi-query attention: one key/value head)
EXPECTED_FIELDS = {
    "gpt2": {"intermediate_size": 256, "hidden_act": "gelu_new", "rms_norm_eps": 1e-5, "rope_parameters": DEFAULT_ROPE,
             "num_key_value_heads": 4},
    "falcon-multi-query": {"intermediate_size": 256, "hidden_act": "gelu", "rms_norm_eps": 1e-5,
                           "num_key_value_heads": 1},
}


class CountingDrafter(Eagle3Drafter):
    """Counts the draft trees the engine asks for (so a test sees that the drafter ran)."""

    trees = 0

    def begin_tree(self, context):
        self.trees += 1
        return super().begin_tree(context)


@pytest.fixture(scope="module", params=sorted(EXPECTED_FIELDS))
def other_target(request):
    """A tiny enabled GPT-2 or Falcon (multi-query) target, float32, 6 layers."""
    return tiny_model(request.param, num_hidden_layers=TARGET_LAYERS), request.param


def test_fields_come_from_the_targets_own_names(other_target):
    target, family = other_target
    config = make_draft_model(target).config
    text = target.config
    assert {field: getattr(config, field) for field in EXPECTED_FIELDS[family]} == EXPECTED_FIELDS[family]
    if family == "falcon-multi-query":
        assert config.intermediate_size == text.ffn_hidden_size
        assert config.rope_parameters == dict(text.rope_parameters)
    assert config.num_attention_heads == text.num_attention_heads
    assert (config.target_hidden_size, config.target_num_hidden_layers) == (64, TARGET_LAYERS)


@pytest.mark.parametrize("prompt_length", [1, 11])
def test_greedy_generate_equals_stock(other_target, prompt_length):
    target, family = other_target
    ids = prompt(prompt_length, seed=prompt_length)
    expected = target.generate(ids, max_new_tokens=12, do_sample=False)
    drafter = CountingDrafter(make_draft_model(target, seed=5))
    for policy in (hfas.StaticTreePolicy.chain(3), hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=8)):
        out = target.generate(ids, max_new_tokens=12, do_sample=False, assistant_model=drafter, assistant_policy=policy)
        assert torch.equal(out, expected), (family, policy)
    assert drafter.trees > 0


def test_overrides_win_over_the_target(other_target):
    target, _ = other_target
    rope = {"rope_type": "default", "rope_theta": 500000.0}
    config = Eagle3DraftModel.from_target(
        target, intermediate_size=96, hidden_act="silu", rms_norm_eps=1e-6, num_key_value_heads=2, rope_parameters=rope
    ).config
    assert (config.intermediate_size, config.hidden_act, config.rms_norm_eps) == (96, "silu", 1e-6)
    assert (config.num_key_value_heads, config.rope_parameters) == (2, rope)


def test_an_activation_the_llama_mlp_lacks_is_refused_naming_the_option():
    target = tiny_model("gpt2", num_hidden_layers=TARGET_LAYERS)
    target.config.activation_function = "swiglu_fused"  # a name transformers' ACT2FN does not have
    with pytest.raises(ValueError, match=r"'swiglu_fused' \(the target's activation_function\)\. Pass hidden_act="):
        Eagle3DraftModel.from_target(target)
    assert Eagle3DraftModel.from_target(target, hidden_act="gelu").config.hidden_act == "gelu"  # not read when given
    with pytest.raises(ValueError, match=r"'nope' \(given as hidden_act\)\. Pass hidden_act="):
        Eagle3DraftModel.from_target(target, hidden_act="nope")


def tiny_falcon(**attention):
    """A tiny Falcon target with 4 query heads and the given key/value layout."""
    from transformers import FalconConfig, FalconForCausalLM

    config = FalconConfig(vocab_size=96, hidden_size=64, num_hidden_layers=TARGET_LAYERS, num_attention_heads=4,
                          eos_token_id=None, bos_token_id=None, pad_token_id=None, **attention)
    return FalconForCausalLM(config).eval()


@pytest.mark.parametrize(("attention", "kv_heads"), [
    ({"new_decoder_architecture": True, "num_kv_heads": 2}, 2),
    ({"multi_query": True, "num_kv_heads": 4}, 1),  # the old decoder ignores num_kv_heads
    ({"multi_query": False}, 4),
])
def test_a_falcon_targets_key_value_heads_are_the_ones_its_attention_builds(attention, kv_heads):
    target = tiny_falcon(**attention)
    assert target.transformer.h[0].self_attention.num_kv_heads == kv_heads
    assert Eagle3DraftModel.from_target(target).config.num_key_value_heads == kv_heads


def tiny_gemma2():
    """A tiny Gemma 2 target (its config holds the activation as ``hidden_activation``, with no ``hidden_act``)."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    config = Gemma2Config(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=TARGET_LAYERS,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=6,
                          eos_token_id=None, bos_token_id=None, pad_token_id=None)
    return Gemma2ForCausalLM(config).eval()


def test_a_gemma_targets_activation_is_read_from_hidden_activation():
    target = tiny_gemma2()
    assert getattr(target.config, "hidden_act", None) is None
    config = Eagle3DraftModel.from_target(target).config
    assert config.hidden_act == target.config.hidden_activation == "gelu_pytorch_tanh"  # not Llama's silu


@pytest.mark.parametrize("legacy", [{"rope_theta": 5e5}, {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}])
def test_legacy_rope_overrides_are_refused_naming_rope_parameters(target, legacy):
    """The target's rope_parameters (theta 10000) silently won over rope_theta=5e5."""
    with pytest.raises(ValueError, match=rf"legacy {next(iter(legacy))}.*rope_parameters=\{{\"rope_type\": \.\.\., "
                                         r"\"rope_theta\": \.\.\.\}"):
        Eagle3DraftModel.from_target(target, **legacy)
