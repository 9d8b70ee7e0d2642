"""The EAGLE-3 drafter inside generate: lossless, fed the right features, cache consistent across cycles."""

from __future__ import annotations

import pytest
import torch
from tiny_models import PlainStepsBetweenTrees, prompt
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters import DraftContext
from hf_adaptive_spec.drafters.eagle3 import Eagle3Drafter

from .conftest import CUSTOM_IDS, DRAFT_VOCAB, make_draft_model

POLICIES = {
    "chain": hfas.StaticTreePolicy.chain(4),
    "tree": hfas.StaticTreePolicy(depth=3, top_k=4, total_tokens=10),
    "eagle3-default": hfas.StaticTreePolicy(),
}


class RecordingDrafter(Eagle3Drafter):
    """Keeps every DraftContext the engine sends."""

    def bind(self, target):
        super().bind(target)
        self.contexts: list[DraftContext] = []

    def begin_tree(self, context):
        self.contexts.append(context)
        return super().begin_tree(context)


def _drafters(target, frequent_tokens) -> dict[str, Eagle3Drafter]:
    return {
        "full-vocab": Eagle3Drafter(make_draft_model(target)),
        "reduced-vocab+custom-layers": Eagle3Drafter(
            make_draft_model(target, seed=2, draft_to_target=frequent_tokens, aux_hidden_state_layer_ids=CUSTOM_IDS)
        ),
        "single-feature": Eagle3Drafter(make_draft_model(target, seed=3, use_aux_hidden_state=False)),
        "two-layers": Eagle3Drafter(make_draft_model(target, seed=4, num_hidden_layers=2)),
    }


@pytest.mark.parametrize("prompt_length", [1, 9, 33])
def test_greedy_generate_equals_stock(target, frequent_tokens, prompt_length):
    ids = prompt(prompt_length, seed=prompt_length)
    expected = target.generate(ids, max_new_tokens=24, do_sample=False)
    for name, drafter in _drafters(target, frequent_tokens).items():
        for shape, policy in POLICIES.items():
            out = target.generate(
                ids, max_new_tokens=24, do_sample=False, assistant_model=drafter, assistant_policy=policy
            )
            assert torch.equal(out, expected), (name, shape)


def test_reduced_vocabulary_drafts_are_accepted(target, frequent_tokens):
    drafter = Eagle3Drafter(make_draft_model(target, seed=2, draft_to_target=frequent_tokens))
    accepted = 0
    for seed in range(3):
        ids = prompt(9, seed=seed)
        out = target.generate(
            ids,
            max_new_tokens=30,
            do_sample=False,
            assistant_model=drafter,
            assistant_policy=hfas.StaticTreePolicy(),
            return_dict_in_generate=True,
        )
        assert torch.equal(out.sequences, target.generate(ids, max_new_tokens=30, do_sample=False))
        accepted += sum(out.speculation.accepted_lengths)
    assert accepted > 0  # multi-token cycles happened: features of several accepted tokens per cycle


@pytest.mark.parametrize("sample_drafts", [False, True])
def test_sampling_path_with_a_reduced_vocabulary(target, frequent_tokens, sample_drafts):
    """top_k=1 sampling is deterministic, so the sampled-acceptance path must reproduce greedy decoding."""
    drafter = Eagle3Drafter(make_draft_model(target, seed=2, draft_to_target=frequent_tokens))
    policy = hfas.StaticTreePolicy(depth=3, top_k=4, total_tokens=10, sample_drafts=sample_drafts)
    ids = prompt(9, seed=4)
    torch.manual_seed(0)
    out = target.generate(
        ids, max_new_tokens=20, do_sample=True, top_k=1, assistant_model=drafter, assistant_policy=policy
    )
    assert torch.equal(out, target.generate(ids, max_new_tokens=20, do_sample=False))


def test_draft_to_target_maps_the_reduced_vocabulary(target, frequent_tokens):
    drafter = Eagle3Drafter(make_draft_model(target, draft_to_target=frequent_tokens))
    drafter.bind(target)
    assert torch.equal(drafter.draft_to_target, frequent_tokens)
    assert torch.equal(drafter.model.d2t, frequent_tokens - torch.arange(DRAFT_VOCAB))
    assert drafter.model.t2d.sum() == DRAFT_VOCAB and drafter.model.t2d[frequent_tokens].all()
    context = DraftContext(prompt(6), {i: torch.zeros(1, 5, 64) for i in drafter.feature_layers})
    assert drafter.begin_tree(context).shape == (1, DRAFT_VOCAB)
    full = Eagle3Drafter(make_draft_model(target))
    full.bind(target)
    assert full.draft_to_target is None


@pytest.mark.parametrize("layer_ids", [None, CUSTOM_IDS])
def test_features_are_the_target_hidden_states_at_the_configured_layers(target, layer_ids):
    kwargs = {} if layer_ids is None else {"aux_hidden_state_layer_ids": layer_ids}
    drafter = RecordingDrafter(make_draft_model(target, **kwargs))
    assert drafter.feature_layers == tuple(layer_ids or [1, 3, 5])  # [1, L//2, L-1] for L = 6
    ids = prompt(7, seed=5)
    out = target.generate(
        ids, max_new_tokens=20, do_sample=False, assistant_model=drafter, assistant_policy=hfas.StaticTreePolicy()
    )
    last = drafter.contexts[-1].input_ids
    assert torch.equal(last, out[:, : last.shape[1]])
    with torch.no_grad():
        reference = target(last[:, :-1], output_hidden_states=True).hidden_states  # every token but the root
        prefill = target(ids, output_hidden_states=True).hidden_states
    for i in drafter.feature_layers:
        torch.testing.assert_close(drafter.contexts[0].new_features[i], prefill[i], rtol=0, atol=0)
        received = torch.cat([context.new_features[i] for context in drafter.contexts], dim=1)
        torch.testing.assert_close(received, reference[i], rtol=1e-4, atol=5e-4)  # tree-masked vs causal kernels


def test_plain_decoding_steps_hand_their_features_to_the_next_tree(target, frequent_tokens):
    """After depth-0 cycles (no drafting) the drafter gets the skipped tokens' features with the next
    tree's, each once; without them it would stop with a position mismatch."""
    drafter = RecordingDrafter(make_draft_model(target, seed=2, draft_to_target=frequent_tokens))
    ids = prompt(9, seed=6)
    out = target.generate(
        ids, max_new_tokens=24, do_sample=False, assistant_model=drafter, assistant_policy=PlainStepsBetweenTrees()
    )
    assert torch.equal(out, target.generate(ids, max_new_tokens=24, do_sample=False))
    assert drafter.contexts[1].new_features[drafter.feature_layers[0]].shape[1] >= 3  # two plain steps, then a tree
    last = drafter.contexts[-1].input_ids
    with torch.no_grad():
        reference = target(last[:, :-1], output_hidden_states=True).hidden_states
    for i in drafter.feature_layers:
        received = torch.cat([context.new_features[i] for context in drafter.contexts], dim=1)
        torch.testing.assert_close(received, reference[i], rtol=1e-4, atol=5e-4)  # tree-masked vs causal kernels


def _context(ids, features, start: int, end: int) -> DraftContext:
    """Committed tokens ``ids[:, :end+1]`` (root ``ids[0, end]``), new features for tokens ``start..end-1``."""
    return DraftContext(ids[:, : end + 1], {i: f[:, start:end] for i, f in features.items()})


def _draft_two_levels(drafter: Eagle3Drafter, context: DraftContext) -> tuple[hfas.DraftTree, list[torch.Tensor]]:
    """begin_tree, the top-3 children, expand them, their top-2 children, expand those; end_tree."""
    root_rows = drafter.begin_tree(context)
    tree = hfas.DraftTree.with_root(int(context.input_ids[0, -1]))
    log_probs, tokens = root_rows[0].topk(3)
    level1 = tree.add_children(0, tokens.tolist(), log_probs.tolist())
    rows1 = drafter.expand(tree, level1)
    level2 = []
    for node, row in zip(level1, rows1):
        log_probs, tokens = row.topk(2)
        level2 += tree.add_children(node, tokens.tolist(), log_probs.tolist())
    rows2 = drafter.expand(tree, level2)
    drafter.end_tree()
    return tree, [root_rows, rows1, rows2]


@pytest.mark.parametrize("num_layers", [1, 2])
def test_cache_across_cycles_matches_an_unrolled_computation(target, num_layers):
    """Cycle 3's rows equal a fresh drafter's given the whole prefix, and an explicit step-by-step run
    (with two layers, each keeps and trims its own cache)."""
    model = make_draft_model(target, num_hidden_layers=num_layers)
    ids = prompt(20, seed=11)
    with torch.no_grad():
        hidden_states = target(ids, output_hidden_states=True).hidden_states
    features = {i: hidden_states[i] for i in model.config.aux_hidden_state_layer_ids}

    drafter = Eagle3Drafter(model)
    drafter.bind(target)
    for start, end in [(0, 7), (7, 12)]:  # earlier cycles with trees, accepting 5 then 4 tokens
        _draft_two_levels(drafter, _context(ids, features, start, end))
    tree, rows = _draft_two_levels(drafter, _context(ids, features, 12, 19))

    fresh = Eagle3Drafter(model)
    fresh.bind(target)
    fresh_tree, fresh_rows = _draft_two_levels(fresh, _context(ids, features, 0, 19))
    assert fresh_tree.tokens == tree.tokens
    for row, fresh_row in zip(rows, fresh_rows):
        torch.testing.assert_close(row, fresh_row, rtol=1e-5, atol=1e-5)

    # EAGLE-3 by hand: position t reads (feature of token t, embedding of token t+1); a tree node reads
    # its parent's pre-norm output and its own token, one position deeper; no siblings in sight.
    with torch.no_grad():
        for depth2_index, node in enumerate(tree.nodes_at_depth(2)):
            parent = tree.parents[node]
            cache = DynamicCache()
            prefix = model(ids[:, 1:20], model.gather_target_features(features)[:, :19], past_key_values=cache)
            step1 = model(
                torch.tensor([[tree.tokens[parent]]]),
                prefix.prenorm_hidden_states[:, -1:],
                target_features=False,
                past_key_values=cache,
            )
            step2 = model(
                torch.tensor([[tree.tokens[node]]]),
                step1.prenorm_hidden_states,
                target_features=False,
                past_key_values=cache,
            )
            torch.testing.assert_close(rows[0], prefix.logits[:, -1].log_softmax(-1), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(rows[1][parent - 1], step1.logits[0, 0].log_softmax(-1), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(rows[2][depth2_index], step2.logits[0, 0].log_softmax(-1), rtol=1e-5, atol=1e-5)


def test_features_that_skip_tokens_are_refused(target):
    drafter = Eagle3Drafter(make_draft_model(target))
    drafter.bind(target)
    ids = prompt(10)
    features = {i: torch.zeros(1, 10, 64) for i in drafter.feature_layers}
    drafter.begin_tree(_context(ids, features, 0, 5))
    drafter.end_tree()
    with pytest.raises(ValueError, match="every token but the root needs its feature once"):
        drafter.begin_tree(_context(ids, features, 6, 9))


def test_bind_refuses_another_target(target):
    config = target.config.to_dict() | {"num_hidden_layers": 8}
    deeper = LlamaForCausalLM(LlamaConfig(**config))
    drafter = Eagle3Drafter(make_draft_model(target))
    with pytest.raises(ValueError, match="built for a 6-layer target; the target has 8 layers"):
        drafter.bind(deeper)
