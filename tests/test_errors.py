"""Bad input gets a clear error naming the problem and the fix."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import hf_adaptive_spec as hfas
from tiny_models import prompt, tiny_model


def _generate(model, ids=None, **kwargs):
    kwargs.setdefault("assistant_model", hfas.CausalLMDrafter(model))
    kwargs.setdefault("assistant_policy", hfas.StaticTreePolicy.chain(3))
    return model.generate(prompt(5) if ids is None else ids, max_new_tokens=5, do_sample=False, **kwargs)


def test_batch_larger_than_one(llama):
    with pytest.raises(ValueError, match="batch size 1"):
        _generate(llama, ids=torch.cat([prompt(5), prompt(5, seed=1)]))


def test_drafter_vocabulary_mismatch(llama):
    other = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1)).eval()
    with pytest.raises(ValueError, match="vocabulary .* differs .* tokenizer"):
        _generate(llama, assistant_model=other)


def test_attention_kernel_without_tree_masks():
    model = tiny_model("llama")
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(ValueError, match="attn_implementation='sdpa'.*Supported: sdpa, eager"):
        _generate(model, assistant_model=hfas.CausalLMDrafter(tiny_model("llama", seed=1)))


def test_other_cache_implementations_are_refused(llama):
    with pytest.raises(ValueError, match="supports cache_implementation='static' or 'dynamic'"):
        _generate(llama, cache_implementation="offloaded")


class BadConfigPolicy(hfas.DraftPolicy):
    def tree_config(self, state):
        return hfas.TreeConfig(depth=3, top_k=0, total_tokens=4)


class NotAConfigPolicy(hfas.DraftPolicy):
    def tree_config(self, state):
        return {"depth": 3}


class BadSizePolicy(hfas.StaticTreePolicy):
    def num_tokens_to_verify(self, info):
        return -1


class BadStopPolicy(hfas.StaticTreePolicy):
    def continue_drafting(self, step):
        return None


@pytest.mark.parametrize(
    "policy, message",
    [
        (BadConfigPolicy(), "TreeConfig.top_k must be an int >= 1"),
        (NotAConfigPolicy(), "tree_config returned .* expected a TreeConfig"),
        (BadSizePolicy(depth=3, top_k=2, total_tokens=5), "num_tokens_to_verify returned -1"),
        (BadStopPolicy(depth=3, top_k=2, total_tokens=5), "continue_drafting returned None"),
    ],
)
def test_policy_returning_invalid_values(llama, policy, message):
    with pytest.raises(ValueError, match=message):
        _generate(llama, assistant_policy=policy)


def test_policy_must_be_a_draft_policy(llama):
    with pytest.raises(ValueError, match="assistant_policy must be a DraftPolicy"):
        _generate(llama, assistant_policy="static")


def test_drafting_policy_without_drafter(llama):
    with pytest.raises(ValueError, match="got no assistant_model"):
        _generate(llama, assistant_model=None)


def test_assistant_model_of_the_wrong_type(llama):
    with pytest.raises(ValueError, match="assistant_model must be a drafter"):
        _generate(llama, assistant_model="smollm2")


def test_drafter_without_policy(llama):
    with pytest.raises(ValueError, match="needs a policy"):
        llama.generate(prompt(5), max_new_tokens=5, assistant_model=hfas.CausalLMDrafter(llama))


def test_padded_input(llama):
    ids = prompt(5)
    mask = torch.ones_like(ids)
    mask[0, 0] = 0
    with pytest.raises(ValueError, match="padded inputs"):
        _generate(llama, ids=ids, attention_mask=mask)


def test_truncation_out_of_range(llama):
    with pytest.raises(ValueError, match="num_layers must be in 1..3"):
        hfas.CausalLMDrafter.from_target_layers(llama, 4)


def test_feature_index_out_of_range(llama):
    from hf_adaptive_spec.core import FeatureCapture

    with pytest.raises(ValueError, match="out of range for a 4-layer model"):
        FeatureCapture(llama, [5])
