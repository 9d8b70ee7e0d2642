"""The prompt-lookup branch (``prompt_lookup_num_tokens`` with ``assistant_policy``): what it
looks up, how it joins the draft tree, and that generation stays exactly stock generate's."""

from __future__ import annotations

import pytest
import torch
from tiny_models import FAMILIES, prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.tree import DraftTree
from hf_adaptive_spec.generation.prompt_lookup import NgramIndex, graft_chain, lookup_continuation, lookup_hits
from hf_adaptive_spec.policies.base import TreeConfig


def _lookup(tokens, max_ngram_size=2, num_tokens=3):
    return lookup_continuation(torch.tensor(tokens), max_ngram_size, num_tokens)


def test_lookup_takes_the_latest_match_of_the_longest_ngram():
    assert _lookup([1, 2, 9, 1, 2, 8, 7, 1, 2]) == [8, 7, 1]  # [1, 2] last seen before 8
    assert _lookup([5, 2, 9, 1, 2, 8, 3, 5, 2]) == [9, 1, 2]  # [5, 2] beats the later [2]
    assert _lookup([1, 2, 9, 1, 2, 8, 7, 1, 2], max_ngram_size=1) == [8, 7, 1]  # [2] alone: the same match
    assert _lookup([3, 4, 3], num_tokens=5) == [4, 3]  # a match may run into the suffix itself
    assert _lookup([1, 2, 3, 4]) == []  # no earlier occurrence
    assert _lookup([7]) == []


@pytest.mark.parametrize("max_ngram_size", [1, 2, 3])
def test_the_host_index_looks_up_what_lookup_continuation_finds(max_ngram_size):
    """The engine's :class:`NgramIndex`, grown a few tokens at a time, finds at every length what a search of the
    whole sequence finds."""
    generator = torch.Generator().manual_seed(max_ngram_size)
    tokens = torch.randint(0, 5, (120,), generator=generator).tolist()
    index, found = NgramIndex(max_ngram_size), 0
    for start in range(0, len(tokens), 3):
        index.extend(tokens[start : start + 3])
        for num_tokens in (1, 4):
            expected = lookup_continuation(torch.tensor(index.tokens), max_ngram_size, num_tokens)
            assert index.continuation(num_tokens) == expected, (start, num_tokens)
            found += bool(expected)
    assert found > 40
    assert NgramIndex(2).continuation(3) == [] and index.tokens == tokens


@pytest.mark.parametrize("max_ngram_size", [1, 2, 3])
def test_lookup_hits_are_lookup_continuations_first_token_at_every_position(max_ngram_size):
    generator = torch.Generator().manual_seed(max_ngram_size)
    rows = torch.randint(0, 4, (3, 40), generator=generator)  # a small vocabulary repeats n-grams often
    hits = lookup_hits(rows, max_ngram_size)
    for row, row_hits in zip(rows, hits):
        expected = [lookup_continuation(row[:j], max_ngram_size, 1) == [int(row[j])] for j in range(rows.shape[1])]
        assert row_hits.tolist() == expected
    assert 0 < int(hits.sum()) < hits.numel()


def test_lookup_hits_follow_the_longest_ngram_not_the_latest_token():
    # [5, 2] occurred before 9, [2] last before 8: the longest match proposes 9
    assert lookup_hits(torch.tensor([[5, 2, 9, 1, 2, 8, 3, 5, 2, 9]]), 2)[0, -1]
    assert not lookup_hits(torch.tensor([[5, 2, 9, 1, 2, 8, 3, 5, 2, 8]]), 2)[0, -1]
    assert lookup_hits(torch.tensor([[5, 2, 9, 1, 2, 8, 3, 5, 2, 8]]), 1)[0, -1]
    with pytest.raises(ValueError, match="max_ngram_size must be at least 1"):
        lookup_hits(torch.tensor([[1, 2]]), 0)


def test_graft_reuses_drafted_prefix_and_adds_the_rest():
    tree = DraftTree.with_root(5)
    tree.add_children(0, [7, 9], [-0.5, -1.0])
    tree.add_children(1, [4], [-0.7])
    assert graft_chain(tree, [7, 4, 6, 2]) == 2  # 7 -> 4 exist; 6 and 2 are new
    assert tree.tokens == [5, 7, 9, 4, 6, 2]
    assert tree.parents == [-1, 0, 0, 1, 3, 4]
    assert tree.depths == [0, 1, 1, 2, 3, 4]
    assert tree.max_depth == 4
    assert graft_chain(tree, [9, 1]) == 1 and tree.parents[-1] == 2 and tree.depths[-1] == 2
    assert tree.max_depth == 4  # nodes are no longer in depth order


def _repetitive_prompt(length: int, seed: int) -> torch.LongTensor:
    head = prompt(length, seed=seed)
    return torch.cat([head, head, head[:, : length // 2]], dim=1)  # lookups always find a match


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("lookup_tokens", [1, 4])
def test_lookup_branch_matches_stock_greedy(family, lookup_tokens):
    model = tiny_model(family)
    ids = _repetitive_prompt(12, seed=lookup_tokens)
    expected = model.generate(ids, max_new_tokens=24, do_sample=False)
    policies = {
        "tree": hfas.StaticTreePolicy(depth=2, top_k=3, total_tokens=5),
        "plain steps": hfas.StaticTreePolicy(depth=0, top_k=1, total_tokens=1),  # prompt lookup decoding alone
        "lookup first": hfas.LookupFirstPolicy(depth=2, top_k=3, total_tokens=5),  # the tree only where lookup missed
    }
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    drafters = {"tree": drafter, "plain steps": None, "lookup first": drafter}  # None: no drafter
    for name, policy in policies.items():
        out = model.generate(
            ids, max_new_tokens=24, do_sample=False, assistant_model=drafters[name], assistant_policy=policy,
            prompt_lookup_num_tokens=lookup_tokens, max_matching_ngram_size=3, return_dict_in_generate=True,
        )
        assert torch.equal(out.sequences, expected), (family, name)
        stats = out.speculation
        if name == "lookup first":  # a matched cycle verifies its chain and drafts nothing
            assert any(verified > 1 and depth == 0
                       for verified, depth in zip(stats.verified_tokens, stats.draft_depths))
            continue
        drafted = 1 if name == "plain steps" else 5
        assert any(verified > drafted for verified in stats.verified_tokens)  # lookup nodes were verified too
        assert max(stats.draft_depths) <= (0 if name == "plain steps" else 2)  # the drafter's depth, not the chain's


class _AlwaysProposes(hfas.CausalLMDrafter):
    """Drafts ``token`` at every node, whatever its model says."""

    def __init__(self, model, token: int):
        super().__init__(model)
        self.token = token

    def begin_tree(self, context):
        return self._only_token(super().begin_tree(context))

    def expand(self, tree, nodes):
        return self._only_token(super().expand(tree, nodes))

    def _only_token(self, rows: torch.Tensor) -> torch.Tensor:
        only = torch.full_like(rows, float("-inf"))
        only[:, self.token] = 0.0
        return only


def test_policies_hear_what_the_drafter_got_right_apart_from_the_lookup_branch(llama):
    """A drafter that is never right, beside a lookup branch that is: the cycles accept the chain's tokens,
    and ``CycleFeedback.drafter_accepted_length`` says the drafter's own share was none."""
    from hf_adaptive_spec.environments.online import _FeedbackRecorder

    ids = _repetitive_prompt(12, seed=2)  # the generation repeats 4 tokens of itself early on
    expected = llama.generate(ids, max_new_tokens=24, do_sample=False)
    never_said = min(set(range(llama.config.vocab_size)) - set(expected[0].tolist()))
    recorder = _FeedbackRecorder(hfas.StaticTreePolicy.chain(2))
    out = llama.generate(
        ids, max_new_tokens=24, do_sample=False, assistant_model=_AlwaysProposes(llama, never_said),
        assistant_policy=recorder, prompt_lookup_num_tokens=4,
    )
    assert torch.equal(out, expected)
    assert any(f.accepted_length > 0 for f in recorder.feedback)  # the lookup chain was accepted
    assert [f.drafter_accepted_length for f in recorder.feedback] == [0] * len(recorder.feedback)


def test_lookup_branch_respects_max_new_tokens(llama):
    ids = _repetitive_prompt(10, seed=0)
    for new_tokens in (1, 2, 5):
        expected = llama.generate(ids, max_new_tokens=new_tokens, do_sample=False)
        out = llama.generate(
            ids, max_new_tokens=new_tokens, do_sample=False, assistant_model=hfas.CausalLMDrafter(llama),
            assistant_policy=hfas.StaticTreePolicy.chain(3), prompt_lookup_num_tokens=8,
        )
        assert torch.equal(out, expected), new_tokens


def test_cache_sharing_drafter_refuses_the_lookup_branch(llama):
    drafter = hfas.DVIDrafter(llama, exit_layer=1, share_cache=True)
    with pytest.raises(ValueError, match="prompt_lookup_num_tokens"):
        llama.generate(
            prompt(5), max_new_tokens=4, do_sample=False, assistant_model=drafter,
            assistant_policy=hfas.StaticTreePolicy.chain(2), prompt_lookup_num_tokens=3,
        )


def test_lookup_first_drafts_only_where_the_branch_did_not_match(llama):
    """The policy sees the branch's match before choosing the tree (``CycleState.lookup_length``): a cycle whose
    chain matched verifies the chain alone, the others draft; stock's tokens either way."""
    ids = _repetitive_prompt(12, seed=2)
    expected = llama.generate(ids, max_new_tokens=24, do_sample=False)
    seen = []

    class Watching(hfas.LookupFirstPolicy):
        def tree_config(self, state):
            seen.append(state.lookup_length)
            return super().tree_config(state)

    out = llama.generate(ids, max_new_tokens=24, do_sample=False, return_dict_in_generate=True,
                         assistant_model=hfas.CausalLMDrafter.from_target_layers(llama, 2),
                         assistant_policy=Watching(depth=2, top_k=3, total_tokens=5), prompt_lookup_num_tokens=3)
    assert torch.equal(out.sequences, expected)
    stats = out.speculation
    assert 0 in seen and any(seen)  # some cycles matched, some did not
    assert [depth == 0 for depth in stats.draft_depths] == [length > 0 for length in seen]
    assert [verified for verified, length in zip(stats.verified_tokens, seen) if length] == [1 + n for n in seen if n]


def test_a_sampled_lookup_first_policy_verifies_a_matched_chain(llama):
    """A policy drafting sampled trees keeps the branch where it drafts nothing: ``TreeConfig.plain_step()`` is not
    sampled, so the engine grafts the matched chain instead of making the cycle a one-token step."""
    torch.manual_seed(0)
    out = llama.generate(_repetitive_prompt(12, seed=2), max_new_tokens=24, do_sample=True,
                         return_dict_in_generate=True,
                         assistant_model=hfas.CausalLMDrafter.from_target_layers(llama, 2), prompt_lookup_num_tokens=3,
                         assistant_policy=hfas.LookupFirstPolicy(depth=2, top_k=3, total_tokens=5, sample_drafts=True))
    stats = out.speculation
    assert any(verified > 1 and depth == 0 for verified, depth in zip(stats.verified_tokens, stats.draft_depths))
    assert TreeConfig(2, 3, 5, sample_drafts=True).plain_step() == TreeConfig(0, 3, 1)


def test_static_tree_policy_keeps_the_whole_tree_and_picks_the_lookup_first_class():
    from hf_adaptive_spec.policies.static import static_tree_policy

    tree = hfas.TreeConfig(depth=2, top_k=3, total_tokens=6, sample_drafts=True)
    for lookup_first, policy_class in ((False, hfas.StaticTreePolicy), (True, hfas.LookupFirstPolicy)):
        policy = static_tree_policy(tree, lookup_first)
        assert type(policy) is policy_class and policy.config == tree


def test_a_sampled_tree_says_once_that_it_takes_no_lookup_chain(caplog):
    """Sibling groups of a sampled tree stay whole, so no chain is grafted among them: the branch had no effect and
    said nothing (an audit: the verified sizes were those of a call without it)."""
    model = tiny_model("llama")
    repeating = torch.cat([prompt(8)] * 3, dim=1)  # the branch matches at once
    policy = hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6, sample_drafts=True)
    with caplog.at_level("WARNING"):
        out = model.generate(repeating, max_new_tokens=10, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
                             assistant_policy=policy, prompt_lookup_num_tokens=4, return_dict_in_generate=True)
    assert max(out.speculation.verified_tokens) <= 6  # no chain on top of the tree's 6 tokens
    assert "grafts no chain: prompt_lookup_num_tokens has no effect on those cycles" in caplog.text
