"""The DVI drafter inside generate: lossless while learning, only LoRA changes, the logging rule."""

from __future__ import annotations

import re

import pytest
import torch
from tiny_models import prompt

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core import DraftTree
from hf_adaptive_spec.drafters import DraftContext, DraftOutcome
from hf_adaptive_spec.drafters.dvi import DVIDrafter, DVIRecord, RolloutBuffer

from .conftest import CHAIN, EXIT_LAYER, TREE, lora_state, make_drafter, prompts

torch.set_num_threads(1)

POLICIES = {
    "chain": CHAIN,
    "tree": TREE,
    "sampled-tree": hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=7, sample_drafts=True),
}


@pytest.mark.parametrize("policy", ["chain", "tree"])
def test_greedy_output_is_the_targets_while_learning(target, policy):
    drafter = make_drafter(target, update_every=4)
    before = lora_state(drafter)
    for ids in prompts(3):
        reference = target.generate(ids, max_new_tokens=40, do_sample=False)
        out = target.generate(
            ids, max_new_tokens=40, do_sample=False, assistant_model=drafter, assistant_policy=POLICIES[policy]
        )
        assert out.equal(reference)
    assert drafter.updater.num_updates >= 5  # updates ran during the generate calls above
    assert any(not value.equal(lora_state(drafter)[name]) for name, value in before.items())


@pytest.mark.parametrize("family", ["mistral-sliding", "qwen2-hybrid"])
def test_greedy_output_is_the_targets_with_sliding_windows(family):
    from tiny_models import tiny_model

    model = tiny_model(family)
    drafter = make_drafter(model, update_every=4)
    ids = prompt(8, seed=2)
    reference = model.generate(ids, max_new_tokens=30, do_sample=False)
    for policy in ("chain", "tree"):
        out = model.generate(
            ids, max_new_tokens=30, do_sample=False, assistant_model=drafter, assistant_policy=POLICIES[policy]
        )
        assert out.equal(reference), policy
    assert drafter.updater.num_updates > 0


def test_sampled_trees_run_and_log(target):
    drafter = make_drafter(target, update_every=4)
    torch.manual_seed(0)
    out = target.generate(
        prompt(6), max_new_tokens=30, do_sample=True, assistant_model=drafter, assistant_policy=POLICIES["sampled-tree"]
    )
    assert out.shape[1] == 36 and len(drafter.updater.buffer) > 0 and drafter.updater.num_updates > 0


def test_updates_touch_only_the_lora_parameters(target):
    drafter = make_drafter(target, update_every=4)
    target_before = {name: t.detach().clone() for name, t in target.state_dict().items()}
    flags_before = {name: p.requires_grad for name, p in target.named_parameters()}
    head_before = {n: p.detach().clone() for n, p in drafter.head.named_parameters() if "lora_" not in n}
    lora_before = lora_state(drafter)
    for ids in prompts(2):
        target.generate(ids, max_new_tokens=40, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN)
    assert drafter.updater.num_updates >= 3
    for name, value in target.state_dict().items():
        assert value.equal(target_before[name]), name
    for name, param in drafter.head.named_parameters():
        if "lora_" not in name:
            assert param.equal(head_before[name]), name
    assert {n: p.requires_grad for n, p in target.named_parameters()} == flags_before
    assert all(p.grad is None for p in target.parameters())
    changed = [name for name, value in lora_state(drafter).items() if not value.equal(lora_before[name])]
    assert any("lora_A" in n for n in changed) and any("lora_B" in n for n in changed)


def test_the_target_keeps_its_plain_head(target):
    drafter = make_drafter(target)
    assert type(target.lm_head) is torch.nn.Linear
    assert drafter.head.base_model.model.draft_head.base_layer is target.lm_head  # shared, not copied
    assert drafter.shallow.layers[EXIT_LAYER - 1] is target.model.layers[EXIT_LAYER - 1]
    assert len(drafter.shallow.layers) == EXIT_LAYER


def test_buffer_is_bounded():
    buffer = RolloutBuffer(capacity=5)
    state = torch.zeros(4)
    buffer.add([DVIRecord(state, token, state, 1.0, 1) for token in range(12)])
    assert len(buffer) == 5 and buffer.total_added == 12
    assert [r.token for r in buffer] == [7, 8, 9, 10, 11]
    assert [r.token for r in buffer.newest(2)] == [10, 11]
    assert len(buffer.sample(3, torch.Generator().manual_seed(0))) == 3


def test_drafter_buffer_stays_within_its_size(target):
    drafter = make_drafter(target, buffer_size=10, update_every=0)
    target.generate(prompt(6), max_new_tokens=60, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN)
    assert len(drafter.updater.buffer) == 10 < drafter.updater.buffer.total_added


def test_logged_records_follow_the_engine_outcomes(target):
    """Chain of depth d, a accepted: min(a + 1, d) records, a of them rewarded.

    The engine reports each drafted cycle's outcome right after verification (Drafter.observe),
    the last cycle's included.
    """
    drafter = make_drafter(target, update_every=0, buffer_size=10_000)
    target.generate(
        prompt(6, seed=3), max_new_tokens=50, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN
    )
    stats = target.last_speculation
    cycles = [(a, d) for a, d in zip(stats.accepted_lengths, stats.draft_depths) if d >= 1]  # every drafted cycle
    records = list(drafter.updater.buffer)
    assert len(records) == sum(min(a + 1, d) for a, d in cycles)
    assert sum(r.reward for r in records) == sum(a for a, _ in cycles)
    assert 0 < sum(a for a, _ in cycles) < len(records)  # both outcomes occur


def _drafted_chain(drafter: DVIDrafter, context_ids: torch.Tensor, tokens: list[int]) -> DraftTree:
    """Drive the drafter through one cycle drafting the chain ``tokens`` below the root."""
    tree = DraftTree.with_root(int(context_ids[0, -1]))
    drafter.begin_tree(DraftContext(context_ids))
    parent = 0
    for depth, token in enumerate(tokens, start=1):
        (node,) = tree.add_children(parent, [token], [-float(depth)])
        if depth < len(tokens):
            drafter.expand(tree, [node])
        parent = node
    drafter.end_tree()
    return tree


def _outcome(committed: torch.Tensor, features: dict[int, torch.Tensor]) -> DraftOutcome:
    """What the engine reports after verification: the committed tokens and the target's states
    before each (the drafter learns from its own remembered tree, not the verified one)."""
    tokens = committed[0].tolist()
    verified = DraftTree.with_root(0)  # the accepted chain: root, then every committed token but the last
    for parent, token in enumerate(tokens[:-1]):
        verified.add_children(parent, [token], [0.0])
    return DraftOutcome(verified, list(range(len(tokens))), tokens, features)


def test_records_stop_at_the_first_reject(target):
    drafter = make_drafter(target, update_every=0, share_cache=False)
    drafter.bind(target)
    context = prompt(6, seed=5)
    d1, d2, d3, d4, other = 11, 12, 13, 14, 15
    _drafted_chain(drafter, context, [d1, d2, d3, d4])
    committed = torch.tensor([[d1, d2, other]])  # d1, d2 accepted; the target emitted `other` instead of d3
    features = torch.randn(1, 3, target.config.hidden_size)  # final-norm outputs at root, d1, d2
    num_layers = target.config.num_hidden_layers
    drafter.observe(_outcome(committed, {num_layers: features}))
    records = list(drafter.updater.buffer)
    assert [(r.token, r.reward, r.depth) for r in records] == [(d1, 1.0, 1), (d2, 1.0, 2), (d3, 0.0, 3)]  # no d4
    for i, record in enumerate(records):
        assert record.target_state.equal(features[0, i])
    with torch.no_grad():  # h_k of root, d1, d2 from a plain forward of the committed prefix
        path = torch.cat([context, torch.tensor([[d1, d2]])], dim=1)
        expected = drafter.shallow(input_ids=path).last_hidden_state[0, -3:]
    torch.testing.assert_close(torch.stack([r.draft_state for r in records]), expected, atol=1e-4, rtol=1e-4)


def test_a_fully_accepted_chain_logs_every_position_and_no_more(target):
    drafter = make_drafter(target, update_every=0, share_cache=False)
    drafter.bind(target)
    context = prompt(6, seed=6)
    chain = [21, 22, 23, 24]
    _drafted_chain(drafter, context, chain)
    committed = torch.tensor([chain + [25]])  # all four accepted, then the target's bonus token
    features = torch.randn(1, 5, target.config.hidden_size)
    drafter.observe(_outcome(committed, {target.config.num_hidden_layers: features}))
    assert [(r.token, r.reward) for r in drafter.updater.buffer] == [(t, 1.0) for t in chain]


def test_tree_records_follow_the_committed_branch(target):
    drafter = make_drafter(target, update_every=0, share_cache=False)
    drafter.bind(target)
    context = prompt(6, seed=7)
    tree = DraftTree.with_root(int(context[0, -1]))
    drafter.begin_tree(DraftContext(context))
    a, b = tree.add_children(0, [31, 32], [-0.1, -0.5])  # a is the drafter's favourite
    drafter.expand(tree, [a, b])
    tree.add_children(a, [41, 42], [-0.2, -0.3])
    tree.add_children(b, [43, 44], [-0.9, -0.6])
    drafter.end_tree()
    committed = torch.tensor([[32, 50]])  # branch b accepted, then a token none of b's children had
    features = torch.randn(1, 2, target.config.hidden_size)
    drafter.observe(_outcome(committed, {target.config.num_hidden_layers: features}))
    # b accepted at depth 1; at depth 2 the first reject is b's best child (44, score -0.6 > -0.9)
    assert [(r.token, r.reward, r.depth) for r in drafter.updater.buffer] == [(32, 1.0, 1), (44, 0.0, 2)]


def test_frozen_drafters_log_nothing_and_ask_for_no_features(target):
    drafter = make_drafter(target)
    assert drafter.feature_layers == (target.config.num_hidden_layers,)
    drafter.freeze()
    assert drafter.feature_layers == ()
    target.generate(prompt(6), max_new_tokens=30, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN)
    assert len(drafter.updater.buffer) == 0 and drafter.updater.num_updates == 0
    assert make_drafter(target, online=False).feature_layers == ()


def test_bind_refuses_another_model(target):
    from tiny_models import tiny_model

    drafter = make_drafter(target, online=False)
    with pytest.raises(ValueError, match="built from another model"):
        tiny_model("llama", seed=1).generate(
            prompt(6), max_new_tokens=4, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN
        )


def test_a_copy_is_refused_with_the_way_to_a_second_drafter(target, tmp_path):
    """copy.deepcopy, pickle and torch.save of a DVI drafter failed on its lock ('cannot pickle _thread.RLock'),
    naming no way on; had they copied, the copy would have duplicated the target's first layers apart from it. The
    refusal names the way to a second drafter, and that way drafts what the first one drafts."""
    import copy
    import io
    import pickle

    drafter = make_drafter(target, online=False)
    for copy_it in (copy.deepcopy, pickle.dumps, lambda obj: torch.save(obj, io.BytesIO())):
        with pytest.raises(TypeError, match=r"DVIDrafter cannot be copied.*first 2 layers.*from_pretrained"):
            copy_it(drafter)
    with torch.no_grad():  # an adapter of its own (a fresh one drafts as the plain head)
        for name, param in drafter.head.named_parameters():
            if "lora_" in name:
                param.add_(torch.randn_like(param))
    drafter.save_pretrained(tmp_path)
    second = DVIDrafter.from_pretrained(tmp_path, target=target)
    saved = lora_state(drafter)
    assert all(torch.equal(param, saved[name]) for name, param in lora_state(second).items())
    run = dict(max_new_tokens=12, do_sample=False, assistant_policy=CHAIN, return_dict_in_generate=True)
    outputs = [target.generate(prompt(6), assistant_model=one, **run) for one in (drafter, second)]
    assert outputs[0].speculation.accepted_lengths == outputs[1].speculation.accepted_lengths


@pytest.mark.parametrize("exit_layer", [0, 4, 5, 2.5, "2", True])
def test_an_exit_layer_outside_the_target_is_refused_by_its_name(target, exit_layer):
    """The draft path is a strict part of the target: the error names exit_layer and the target's layer count (not
    the truncation helper's num_layers, which a DVI user never passed); a float, a string (a config.json edited by
    hand) or a bool is not a layer count."""
    named = re.escape(repr(exit_layer))
    with pytest.raises(ValueError, match=rf"exit_layer={named} does not fit a 4-layer target.*an int in 1\.\.3"):
        DVIDrafter(target, exit_layer=exit_layer)


def test_updates_work_inside_inference_mode(target):
    drafter = make_drafter(target, update_every=4)
    with torch.inference_mode():
        target.generate(prompt(6), max_new_tokens=30, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN)
    assert drafter.updater.num_updates > 0


def test_outcome_records_never_look_past_the_first_reject():
    """Even when later committed tokens happen to match drafted ones, nothing after the reject is logged."""
    from hf_adaptive_spec.drafters.dvi import outcome_records

    tree = DraftTree.with_root(1)
    (a,) = tree.add_children(0, [11], [-0.1])
    b, _ = tree.add_children(a, [12, 13], [-0.2, -0.9])
    (d,) = tree.add_children(b, [14], [-0.3])
    states = {node: torch.full((2,), float(node)) for node in (0, a, b, d)}
    targets = torch.arange(8.0).reshape(4, 2)
    records = outcome_records(tree, states, [11, 99, 14, 15], targets)  # 99 rejects 12 and 13; 14 would match d
    assert [(r.token, r.reward, r.depth) for r in records] == [(11, 1.0, 1), (12, 0.0, 2)]
    assert records[1].draft_state.equal(states[a]) and records[1].target_state.equal(targets[1])
    assert outcome_records(tree, states, [], targets) == []


def _logged_records(drafter: DVIDrafter, target, policy, prompts_ids, **generate_kwargs) -> list[tuple]:
    """(token logged, reward, tokens the drafter proposed below that record's node) for every record a run logs."""
    logged = []
    observe = drafter.observe

    def spy(outcome):
        before = len(drafter.updater.buffer)
        draft = drafter.learner._draft
        observe(outcome)
        tree = draft.tree if draft.tree is not None else outcome.tree
        limit = draft.drafted_nodes if draft.tree is not None else (outcome.drafter_nodes or len(tree))
        node = 0
        for record in list(drafter.updater.buffer)[before:]:
            proposed = [tree.tokens[c] for c in tree.children(node) if c < limit]
            logged.append((record.token, record.reward, proposed))
            node = next((c for c in tree.children(node) if c < limit and tree.tokens[c] == record.token), node)

    drafter.observe = spy
    for ids in prompts_ids:
        target.generate(ids, max_new_tokens=30, assistant_model=drafter, assistant_policy=policy, **generate_kwargs)
    return logged


@pytest.mark.parametrize("case", ["prompt-lookup chain grafted", "sampled depth-1 tree"])
def test_online_records_name_only_tokens_the_drafter_proposed(target, case):
    """A lookup chain grafted onto the drafter's tree, and children sampled at depth 1 (no expand follows), are
    what verification saw; a record must name a token the drafter itself proposed there, and its reward."""
    from hf_adaptive_spec.drafters.dvi import DVIOnlineLearnerConfig

    config = DVIOnlineLearnerConfig(update_every=0, buffer_size=10_000)
    drafter = DVIDrafter(target, exit_layer=EXIT_LAYER, online=True, online_config=config, share_cache=False)
    torch.manual_seed(1)
    if case == "prompt-lookup chain grafted":  # prompts that repeat what the target will say, so the chain matches
        repeated = [torch.cat([target.generate(p, max_new_tokens=30, do_sample=False), p], dim=1) for p in prompts(4)]
        logged = _logged_records(drafter, target, hfas.StaticTreePolicy.chain(2), repeated, do_sample=False,
                                 prompt_lookup_num_tokens=4)
    else:
        sampled = hfas.StaticTreePolicy(depth=1, top_k=1, total_tokens=2, sample_drafts=True)
        logged = _logged_records(drafter, target, sampled, prompts(3), do_sample=True)
    assert len(logged) > 20
    assert all(token in proposed for token, _, proposed in logged)
