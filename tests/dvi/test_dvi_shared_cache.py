"""DVI draft and verification sharing the first layers' KV cache: lossless, and really shared."""

from __future__ import annotations

import pytest
import torch
from tiny_models import PlainStepsBetweenTrees, prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.dvi import DVIDrafter
from hf_adaptive_spec.drafters.dvi import shared_cache as dvi_shared_cache_module
from hf_adaptive_spec.policies.base import DraftPolicy

from .conftest import CHAIN, EXIT_LAYER, TREE, make_drafter, prompts

torch.set_num_threads(1)

POLICIES = {
    "chain": CHAIN,
    "tree": TREE,
    "wide": hfas.StaticTreePolicy(depth=2, top_k=6, total_tokens=9),
    "deep-pruned": hfas.StaticTreePolicy(depth=5, top_k=3, total_tokens=7),
    "plain-steps-between-trees": PlainStepsBetweenTrees(),
}


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("online", [False, True])
def test_shared_cache_greedy_output_is_the_targets(target, policy, online):
    drafter = make_drafter(target, online=online, update_every=4)
    assert drafter.cache_sharing.layers == EXIT_LAYER
    for ids in prompts(3):
        reference = target.generate(ids, max_new_tokens=40, do_sample=False)
        out = target.generate(ids, max_new_tokens=40, do_sample=False, assistant_model=drafter,
                              assistant_policy=POLICIES[policy])
        assert out.equal(reference), policy


def test_shared_cache_sampling_runs_with_sampled_trees(target):
    drafter = make_drafter(target, online=False)
    torch.manual_seed(0)
    policy = hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=7, sample_drafts=True)
    out = target.generate(prompt(6), max_new_tokens=30, do_sample=True, assistant_model=drafter,
                          assistant_policy=policy)
    assert out.shape[1] == 36


def test_sampled_siblings_that_draw_one_token_take_a_slot_each(monkeypatch):
    """Sampled children are drawn with replacement, so siblings may share a token; verification matched nodes to
    fed slots by token path, gave two nodes one slot, and the cache's compaction failed ("expanded size 4, existing
    size 5") wherever a tree held such a pair (an audit's repro: this target, prompt and policy). Greedy decoding of
    sampled trees is lossless: stock's tokens, with trees that held a repeated sibling."""
    model = tiny_model("llama")
    repeated = []
    fed_slots = dvi_shared_cache_module._fed_slots

    def recording(tree, tail_paths):
        siblings = [(tree.parents[node], tree.tokens[node]) for node in range(1, len(tree))]
        repeated.append(len(set(siblings)) < len(siblings))
        return fed_slots(tree, tail_paths)

    monkeypatch.setattr(dvi_shared_cache_module, "_fed_slots", recording)
    ids = prompt(8)
    reference = model.generate(ids, max_new_tokens=30, do_sample=False)
    for seed in range(3):
        torch.manual_seed(seed)
        out = model.generate(ids, max_new_tokens=30, do_sample=False, assistant_model=DVIDrafter(model, exit_layer=2),
                             assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6,
                                                                    sample_drafts=True))
        assert out.equal(reference), seed
    assert any(repeated)


def _rows_through(layer: torch.nn.Module, run) -> int:
    """Token rows ``layer`` processes while ``run()`` executes."""
    rows = []
    handle = layer.register_forward_pre_hook(
        lambda module, args, kwargs: rows.append((args[0] if args else kwargs["hidden_states"]).shape[1]),
        with_kwargs=True,
    )
    try:
        run()
    finally:
        handle.remove()
    return sum(rows)


@pytest.mark.parametrize("share", [True, False])
def test_shared_layers_never_recompute_a_token(target, share):
    """With sharing, layer 0 sees each prompt token once and each verified node once (a chain
    feeds every node but the leaf while drafting, and the leaf at verification)."""
    drafter = make_drafter(target, online=False, share_cache=share)
    ids = prompt(9, seed=4)

    def run():
        return target.generate(ids, max_new_tokens=30, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN)

    first = _rows_through(target.model.layers[0], run)
    stats = target.last_speculation
    deep = _rows_through(target.model.layers[EXIT_LAYER], run)
    assert deep == ids.shape[1] + sum(stats.verified_tokens)  # the deep layers verify every node once either way
    if share:
        assert first == ids.shape[1] + sum(stats.verified_tokens)
    else:  # the drafter's own cache re-reads every committed token, and verification recomputes the drafted ones
        assert first > ids.shape[1] + sum(stats.verified_tokens) + len(stats.verified_tokens)


def test_reordering_the_shared_tail_is_needed(target, monkeypatch):
    """Breaking the shared layers' reorder into tree order changes the output: the identity test can fail."""
    original = dvi_shared_cache_module.compact_cache

    def no_reorder(cache, num_tree, keep, layers=None):  # keep the first slots, ignoring the tree order
        original(cache, num_tree, torch.arange(keep.numel(), device=keep.device), layers)

    monkeypatch.setattr(dvi_shared_cache_module, "compact_cache", no_reorder)
    drafter = make_drafter(target, online=False)
    policy = POLICIES["deep-pruned"]
    differs = [
        not target.generate(
            ids, max_new_tokens=40, do_sample=False, assistant_model=drafter, assistant_policy=policy
        ).equal(target.generate(ids, max_new_tokens=40, do_sample=False))
        for ids in prompts(3)
    ]
    assert any(differs)


def test_sliding_window_layers_cannot_be_shared():
    model = tiny_model("mistral-sliding")
    assert DVIDrafter(model, exit_layer=2).cache_sharing is None  # the default falls back to its own cache
    with pytest.raises(ValueError, match="share_cache=False"):
        DVIDrafter(model, exit_layer=2, share_cache=True)


def test_features_from_shared_layers_are_refused(target):
    class WantsShallowFeatures(DraftPolicy):
        feature_layers = (1,)

        def tree_config(self, state):
            return CHAIN.config

    drafter = make_drafter(target, online=False)
    with pytest.raises(ValueError, match="shares the target's first 2 layers"):
        target.generate(prompt(5), max_new_tokens=8, do_sample=False, assistant_model=drafter,
                        assistant_policy=WantsShallowFeatures())


@pytest.mark.parametrize("family", ["mistral-sliding", "qwen2-hybrid"])
def test_a_sliding_window_target_drafts_alike_on_both_paths(family):
    """Sliding shallow layers are not shared (above); DVI then drafts in a cache of its own, and on the static path
    (where the target's cache keeps sliding layers full-length) it drafts what it drafts on the dynamic one."""
    model = tiny_model(family)
    ids = prompt(30, seed=30)  # past both windows (6 and 5 tokens)
    expected = model.generate(ids, max_new_tokens=24, do_sample=False)
    accepted = {}
    for cache in ("dynamic", "static"):
        out = model.generate(ids, max_new_tokens=24, do_sample=False, assistant_model=DVIDrafter(model, exit_layer=2),
                             assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=8),
                             return_dict_in_generate=True,
                             **({"cache_implementation": "static"} if cache == "static" else {}))
        assert torch.equal(out.sequences, expected), cache
        accepted[cache] = out.speculation.accepted_lengths
    assert accepted["static"] == accepted["dynamic"]
