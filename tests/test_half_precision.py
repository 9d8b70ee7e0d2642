"""Half-precision targets: greedy choices follow the head's float32 products, not their rounding.

A bfloat16 head rounds its logits to 8 significant bits, so near the top of a row tokens tie or
swap. The engine rescores the few tokens within the rounding margin of each visited row's maximum
in float32 (``TopLogitsRescorer``); these tests check the rule itself (and that they fail without
it or with too small a margin) and that both targets, dynamic and static, apply it.
"""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model
from torch import nn
from transformers import DynamicCache

from hf_adaptive_spec.core import DraftTree, TopLogitsRescorer, prepare_cache_for_trees
from hf_adaptive_spec.generation.static_path import fast_path
from hf_adaptive_spec.generation.targets import DynamicTarget, StaticTarget


def _near_tie_rows(seed: int = 0, rows: int = 400, vocab: int = 2048, hidden: int = 64):
    """A bfloat16 head whose top logits (about 20) are often closer than a rounding step (1/16)."""
    generator = torch.Generator().manual_seed(seed)
    head = nn.Linear(hidden, vocab, bias=False)
    with torch.no_grad():
        base = torch.randn(hidden, generator=generator)
        head.weight.copy_(base + 0.02 * torch.randn(vocab, hidden, generator=generator))  # nearly equal rows
    head = head.to(torch.bfloat16)
    states = (torch.randn(rows, hidden, generator=generator) + 0.1 * base).to(torch.bfloat16)
    exact = states.float() @ head.weight.float().T
    return head, states, exact


def _mismatches(rescore, head, states, exact) -> int:
    with torch.no_grad():
        rounded = head(states)
    return sum(int(rescore(rounded[i], states[i]).argmax() != exact[i].argmax()) for i in range(len(states)))


def test_rescored_rows_have_the_float32_argmax():
    head, states, exact = _near_tie_rows()
    assert _mismatches(TopLogitsRescorer(head, torch.bfloat16), head, states, exact) == 0


def test_the_rounded_rows_miss_it():
    """Control: the same rows without rescoring pick another token in about a quarter of them."""
    head, states, exact = _near_tie_rows()
    assert _mismatches(lambda row, _: row.float(), head, states, exact) > 40


def test_rescoring_only_applies_to_plain_half_precision_heads():
    head = nn.Linear(8, 16)
    assert TopLogitsRescorer.applies(head, torch.bfloat16) and TopLogitsRescorer.applies(head, torch.float16)
    assert not TopLogitsRescorer.applies(head, torch.float32)
    assert not TopLogitsRescorer.applies(nn.Sequential(head), torch.bfloat16)


def _chain(tokens: list[int]) -> DraftTree:
    tree = DraftTree.with_root(tokens[0])
    parent = 0
    for token in tokens[1:]:
        parent = tree.add_children(parent, [token], [0.0])[0]
    return tree


@pytest.mark.parametrize("static", [False, True])
def test_both_targets_rescore_half_precision_rows(static):
    model = tiny_model("llama").to(torch.bfloat16)
    ids = prompt(9)
    final = model.config.num_hidden_layers
    if static:
        cache = fast_path(model).cache_for(64)
        target = StaticTarget(model, cache, {final}, fast_path(model), options=None)
    else:
        cache = prepare_cache_for_trees(DynamicCache(config=model.config))
        target = DynamicTarget(model, cache, {final})
    with torch.no_grad(), target:
        first, _ = target.prefill(ids, {"past_key_values": cache, "use_cache": True})
        assert first.rescorer is not None
        tree = _chain([int(first[0].argmax()), 5, 17, 3])
        logits = target.verify(tree, ids.shape[1])
        assert logits.rescorer is not None
        hidden = target.commit(tree, ids.shape[1], torch.arange(len(tree)))[final][0]
    weight = model.lm_head.weight.float()
    for node in range(len(tree)):
        assert int(logits[node].argmax()) == int((hidden[node].float() @ weight.T).argmax())
        assert logits[node].dtype == torch.float32


def test_float32_targets_are_not_rescored(llama):
    cache = prepare_cache_for_trees(DynamicCache(config=llama.config))
    target = DynamicTarget(llama, cache, set())
    with torch.no_grad(), target:
        first, _ = target.prefill(prompt(6), {"past_key_values": cache, "use_cache": True})
    assert first.rescorer is None


def test_rows_rescored_together_have_the_float32_argmax():
    """``argmaxes`` (the accelerator's walk reads them at once): each settled row's token is the float32 argmax. A
    row with more near tokens than candidates is not settled (its walk rescores it alone), never given a wrong
    token. These rows are built to tie (several candidates each); SmolLM2's rows had at most 6 near tokens over
    Spec-Bench answers."""
    head, states, exact = _near_tie_rows()
    rescorer = TopLogitsRescorer(head, torch.bfloat16)
    with torch.no_grad():
        rounded = head(states)
    settled_counts = []
    for candidates in (head.out_features, 16, 2):
        choices, settled = rescorer.argmaxes(rounded, states, candidates).tolist()
        wrong = [i for i, (choice, ok) in enumerate(zip(choices, settled)) if ok and choice != int(exact[i].argmax())]
        assert wrong == [], (candidates, wrong)
        settled_counts.append(sum(settled))
    assert settled_counts[0] == len(states) and settled_counts[0] > settled_counts[1] > settled_counts[2] > 0, (
        settled_counts
    )


def test_rows_rescored_together_break_ties_as_argmax():
    """Two tokens with the same weights have the same float32 product: the lower id wins, as ``argmax``'s."""
    head = nn.Linear(8, 32, bias=False)
    with torch.no_grad():
        head.weight[5] = head.weight[23] = torch.linspace(1.0, 2.0, 8)
    head = head.to(torch.bfloat16)
    states = torch.ones(3, 8, dtype=torch.bfloat16)
    rescorer = TopLogitsRescorer(head, torch.bfloat16)
    with torch.no_grad():
        rounded = head(states)
    choices, settled = rescorer.argmaxes(rounded, states).tolist()
    assert choices == [5, 5, 5] and all(settled)
    assert [int(rescorer(rounded[i], states[i]).argmax()) for i in range(3)] == choices
