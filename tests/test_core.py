"""Tree structure, tree masks, cache compaction and feature capture against plain forwards."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from tiny_models import FAMILIES, prompt, tiny_model
from torch_calls import TorchCalls
from transformers import DynamicCache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core import (
    FeatureCapture,
    compact_cache,
    drop_tail,
    end_of_sequence_ids,
    nodes_in_place,
    prepare_cache_for_trees,
    tree_attention_mask,
)


def _tree() -> hfas.DraftTree:
    tree = hfas.DraftTree.with_root(5)
    a, _, _ = tree.add_children(0, [7, 8, 9], [-0.1, -0.5, -1.0])
    tree.add_children(a, [10, 11], [-0.2, -0.3])
    return tree


def test_tree_structure():
    tree = _tree()
    assert tree.parents == [-1, 0, 0, 0, 1, 1] and tree.depths == [0, 1, 1, 1, 2, 2]
    assert tree.scores[4] == pytest.approx(-0.3)
    assert tree.path_to(5) == [0, 1, 5] and tree.children(1) == [4, 5]
    mask = tree.ancestor_mask()
    assert mask[5].tolist() == [True, True, False, False, False, True]
    sub = tree.subtree([0, 1, 3, 4])
    assert sub.tokens == [5, 7, 9, 10] and sub.parents == [-1, 0, 0, 1]
    with pytest.raises(ValueError):
        tree.subtree([0, 4])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_tree_logits_and_compaction_equal_plain_forwards(family):
    model = tiny_model(family)
    context = prompt(9, seed=2)
    tree = _tree()
    cache = prepare_cache_for_trees(DynamicCache(config=model.config))
    with torch.no_grad():
        model(context[:, :-1], past_key_values=cache, use_cache=True)  # last context token is the root
        tree.tokens[0] = int(context[0, -1])
        past = context.shape[1] - 1
        positions = past + torch.tensor(tree.depths)
        mask = tree_attention_mask(model.config, cache, positions, positions, tree.ancestor_mask(), model.dtype)
        logits = model(torch.tensor([tree.tokens]), attention_mask=mask, position_ids=positions[None],
                       past_key_values=cache, use_cache=True).logits[0]
        for node in range(len(tree)):
            path = torch.tensor([[tree.tokens[i] for i in tree.path_to(node)]])
            plain = model(torch.cat([context[:, :-1], path], 1)).logits[0, -1]
            torch.testing.assert_close(logits[node], plain, atol=1e-5, rtol=1e-5)
        compact_cache(cache, len(tree), torch.tensor([0, 1, 5]))
        assert cache.get_seq_length() == past + 3
        follow = torch.tensor([[3]])
        after = model(follow, past_key_values=cache, use_cache=True,
                      position_ids=torch.tensor([[past + 3]])).logits[0, -1]
        accepted = torch.tensor([[tree.tokens[i] for i in [0, 1, 5]]])
        plain = model(torch.cat([context[:, :-1], accepted, follow], 1)).logits[0, -1]
        torch.testing.assert_close(after, plain, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("path", "in_place"), [([0], 1), ([0, 1, 2], 3), ([0, 2, 3], 1), ([0, 1, 5], 2)])
def test_nodes_in_place_counts_the_leading_nodes_at_their_own_slot(path, in_place):
    assert nodes_in_place(path) == in_place


def _filled_tree_cache(family: str, num_tree: int) -> DynamicCache:
    model = tiny_model(family)
    cache = prepare_cache_for_trees(DynamicCache(config=model.config))
    with torch.no_grad():
        model(prompt(9, seed=3), past_key_values=cache, use_cache=True)
        model(torch.arange(1, num_tree + 1)[None], past_key_values=cache, use_cache=True)
    return cache


@pytest.mark.parametrize("family", ["llama", "mistral-sliding"])
@pytest.mark.parametrize("path", [[0, 1, 5], [0, 1, 2], [0], [0, 3]])
def test_compaction_leaves_the_nodes_in_place_where_they_are(family, path):
    """Compacting with the leading nodes that are already in place left alone gives the cache a full compaction gives;
    a path entirely in place is a crop, with no index copied to the device nor a slot moved."""
    expected, cache = _filled_tree_cache(family, 6), _filled_tree_cache(family, 6)
    compact_cache(expected, 6, torch.tensor(path))
    with TorchCalls() as calls:
        compact_cache(cache, 6, torch.tensor(path), in_place=nodes_in_place(path))
    moves = calls.counts[torch.Tensor.__setitem__]
    assert moves == (0 if nodes_in_place(path) == len(path) else 2 * len(cache.layers)), calls.counts
    assert cache.get_seq_length() == expected.get_seq_length()
    for layer, full in zip(cache.layers, expected.layers):
        assert torch.equal(layer.keys, full.keys) and torch.equal(layer.values, full.values)


@pytest.mark.parametrize("family", ["llama", "mistral-sliding"])
def test_dropping_a_tail_is_a_crop(family):
    """``drop_tail`` leaves every layer as it was before the tail's forward, without copying an index to the device
    nor moving a slot (the old way kept none of the tail through compact_cache: an upload and gathers per layer)."""
    model = tiny_model(family)
    context = prompt(9, seed=3)
    cache = prepare_cache_for_trees(DynamicCache(config=model.config))
    with torch.no_grad():
        model(context, past_key_values=cache, use_cache=True)
        before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        model(torch.tensor([[1, 2, 3]]), past_key_values=cache, use_cache=True)
    with TorchCalls() as calls:
        drop_tail(cache, 3)
    assert not calls.counts.keys() & {torch.Tensor.to, torch.Tensor.__setitem__, torch.Tensor.__radd__}, calls.counts
    assert cache.get_seq_length() == context.shape[1]
    for layer, (keys, values) in zip(cache.layers, before):
        kept = layer.keys.shape[2]  # a sliding layer keeps its window's last entries alone
        assert kept >= min(5, keys.shape[2])
        assert torch.equal(layer.keys, keys[:, :, -kept:]) and torch.equal(layer.values, values[:, :, -kept:])


def test_feature_capture_equals_output_hidden_states(llama):
    ids = prompt(7)
    with torch.no_grad():
        reference = llama(ids, output_hidden_states=True).hidden_states
        with FeatureCapture(llama, [0, 2, 4]) as capture:
            llama(ids)
    for index in (0, 2, 4):
        torch.testing.assert_close(capture.latest[index], reference[index])


@pytest.mark.parametrize(
    ("config_eos", "tokenizer_eos", "expected"),
    [(2, 9, (2,)), ([2, 5], 9, (2, 5)), (None, 9, (9,)), (None, None, ())],
)
def test_end_of_sequence_ids_are_the_generation_configs_then_the_tokenizers(config_eos, tokenizer_eos, expected):
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=config_eos))
    assert end_of_sequence_ids(model, SimpleNamespace(eos_token_id=tokenizer_eos)) == expected
    assert end_of_sequence_ids(model) == (() if config_eos is None else expected)


def test_timed_waits_for_the_device_on_both_sides_of_the_call(monkeypatch):
    """The seconds cover the call's queued device work: synchronized before it starts and after it returns."""
    from hf_adaptive_spec.core import timing

    events = []
    monkeypatch.setattr(timing, "synchronize", lambda device: events.append(("synchronize", device.type)))
    result, seconds = timing.timed(torch.device("cuda"), lambda: events.append("call") or 7)
    assert result == 7 and seconds >= 0
    assert events == [("synchronize", "cuda"), "call", ("synchronize", "cuda")]
