"""The EAGLE-3 draft model on its own: config defaults, the explicit fusion flag, training use."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt

from hf_adaptive_spec.drafters.eagle3 import Eagle3DrafterConfig, default_aux_layer_ids

from .conftest import make_draft_model


def test_config_defaults():
    config = Eagle3DrafterConfig(hidden_size=4096, num_attention_heads=32, target_num_hidden_layers=32)
    assert config.aux_hidden_state_layer_ids == default_aux_layer_ids(32) == [2, 16, 29]  # Llama-3.1-8B
    assert config.rope_parameters == {"rope_type": "default", "rope_theta": 10000.0}
    assert (config.draft_vocab_size, config.target_hidden_size, config.num_hidden_layers) == (32000, 4096, 1)
    single = Eagle3DrafterConfig(hidden_size=64, num_attention_heads=4, target_num_hidden_layers=4,
                                 use_aux_hidden_state=False)
    assert single.aux_hidden_state_layer_ids == [4]  # the final norm's output, EAGLE-1 style


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"target_num_hidden_layers": 4, "num_hidden_layers": 0}, "needs at least its EAGLE-3 layer"),
        ({"target_num_hidden_layers": 4, "draft_vocab_size": 40000}, "draft_vocab_size"),
        ({}, "Set aux_hidden_state_layer_ids"),
        ({"aux_hidden_state_layer_ids": [1, 2]}, "needs 3 feature layer"),
        ({"aux_hidden_state_layer_ids": [4], "use_aux_hidden_state": False, "target_hidden_size": 32}, "must equal"),
    ],
)
def test_config_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Eagle3DrafterConfig(hidden_size=64, num_attention_heads=4, **kwargs)


def test_fusion_is_an_explicit_flag_not_a_width_test(target):
    model = make_draft_model(target)
    ids = prompt(6)
    with pytest.raises(ValueError, match="target features of width 192, got 64"):
        model(ids, torch.zeros(1, 6, 64), target_features=True)
    with pytest.raises(ValueError, match="draft hidden states of width 64, got 192"):
        model(ids, torch.zeros(1, 6, 192), target_features=False)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_trainable_forward(target, num_layers):
    """A training step over two chained draft steps: frozen target embeddings, gradients for the rest
    (a further layer's included)."""
    model = make_draft_model(target, num_hidden_layers=num_layers).train()
    assert len(model.layers) == num_layers - 1
    ids = prompt(12)
    with torch.no_grad():
        features = model.gather_target_features(target(ids, output_hidden_states=True).hidden_states)
    step0 = model(ids[:, 1:-1], features[:, :-2])
    step1 = model(ids[:, 2:], step0.prenorm_hidden_states, target_features=False)
    loss = step0.logits.logsumexp(-1).mean() + 0.8 * step1.logits.logsumexp(-1).mean()
    loss.backward()
    assert model.embed_tokens.weight.grad is None
    assert all(p.grad is not None for name, p in model.named_parameters() if name != "embed_tokens.weight")


@torch.no_grad()
def test_logits_index_computes_the_rows_it_selects(target):
    """``logits_index`` gives the logits of its (batch, position) pairs, in their order, as a ``[rows, vocab]``
    tensor; given with ``logits_to_keep``, or as a boolean mask, it is refused with the fix."""
    model = make_draft_model(target)
    ids = torch.cat([prompt(9, seed=1), prompt(9, seed=2)])
    features = model.gather_target_features(target(ids, output_hidden_states=True).hidden_states)
    full = model(ids[:, 1:], features[:, :-1])
    chosen = torch.tensor([[0, 1, 0, 0, 1, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0, 1]], dtype=torch.bool)
    rows = model(ids[:, 1:], features[:, :-1], logits_index=chosen.nonzero(as_tuple=True))
    torch.testing.assert_close(rows.logits, full.logits[chosen])
    assert rows.logits.shape == (5, model.config.draft_vocab_size)
    torch.testing.assert_close(rows.prenorm_hidden_states, full.prenorm_hidden_states)  # every position's, as before
    with pytest.raises(ValueError, match="logits_to_keep or logits_index, not both"):
        model(ids[:, 1:], features[:, :-1], logits_index=chosen.nonzero(as_tuple=True), logits_to_keep=1)
    with pytest.raises(ValueError, match=r"got Tensor. For a boolean mask, pass mask.nonzero\(as_tuple=True\)"):
        model(ids[:, 1:], features[:, :-1], logits_index=chosen)


def test_vocab_mapping_must_be_distinct_target_ids(target, frequent_tokens):
    model = make_draft_model(target, draft_to_target=frequent_tokens)
    duplicated = frequent_tokens.clone()
    duplicated[1] = duplicated[0]
    for bad in (duplicated, frequent_tokens + 96, frequent_tokens[:-1]):
        with pytest.raises(ValueError, match="distinct target ids"):
            model.set_vocab_mapping(bad)
