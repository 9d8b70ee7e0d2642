"""Custom drafters and policies written against the documented interface (drafters/base.py, policies/base.py, README
"Extension points"): contract breaks the engine used to turn into wrong sampling or raw internal errors are refused
with a message naming the drafter's or policy's hook, the rule and the fix."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.base import DraftContext
from hf_adaptive_spec.generation.tree_builder import DraftTimes, TreeBuilder

CONTEXT = DraftContext(torch.tensor([[0, 1, 2]]), {}, None)
ROWS = torch.tensor([0.6, 0.2, 0.1, 0.1]).log()[None]  # log-probs over a 4-token draft vocabulary


class _RowsDrafter(hfas.Drafter):
    """Returns ``root`` from begin_tree and ``level(len(nodes))`` from expand."""

    def __init__(self, root=ROWS, level=None, mapping=None):
        self.root, self.level, self.draft_to_target = root, level, mapping
        self.drafted = 0

    def bind(self, target):
        return None

    def begin_tree(self, context):
        self.drafted += 1
        return self.root

    def expand(self, tree, nodes):
        self.drafted += 1
        return self.level(len(nodes)) if self.level is not None else ROWS.repeat(len(nodes), 1)


class _TargetCopyDrafter(hfas.Drafter):
    """Drafts with the target itself over the target's first ``draft_vocab`` tokens, mapped through ``mapping``
    (the audit's reproducer, without a cache)."""

    def __init__(self, lm, mapping=None, logits=False):
        self.lm, self.draft_to_target, self.logits = lm, mapping, logits
        self.drafted = 0

    def bind(self, target):
        self.prefix = None

    def _rows(self, sequences):
        self.drafted += 1
        with torch.no_grad():
            logits = torch.stack([self.lm(s[None]).logits[0, -1] for s in sequences]).float()
        if self.draft_to_target is not None:
            logits = logits[:, self.draft_to_target]
        return logits if self.logits else torch.log_softmax(logits, -1)

    def begin_tree(self, context):
        self.prefix = context.input_ids[0]
        return self._rows([self.prefix])

    def expand(self, tree, nodes):
        paths = [torch.tensor([tree.tokens[i] for i in tree.path_to(n)[1:]]) for n in nodes]
        return self._rows([torch.cat([self.prefix, path]) for path in paths])


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


def _stock(model, **kwargs):
    return model.generate(prompt(9), max_new_tokens=12, do_sample=False, **kwargs)


def _speculative(model, drafter, policy, **kwargs):
    return model.generate(prompt(9), max_new_tokens=12, assistant_model=drafter, assistant_policy=policy, **kwargs)


# 1. draft_to_target: one-to-one, in range, 1-D integer


BAD_MAPPINGS = {
    "repeated": (torch.arange(80) % 40, r"not one-to-one: 40 target id\(s\) appear more than once"),
    "out of range": (torch.arange(80) + 20, r"of ids in 20\.\.99, outside 0\.\.95"),
    "negative": (torch.arange(80) - 1, r"of ids in -1\.\.78, outside 0\.\.95"),
    "float": (torch.arange(80).float(), r"of dtype torch\.float32, not an integer one \(torch\.long\)"),
    "2-D": (torch.arange(80)[None], r"of shape \[1, 80\], not 1-D"),
    "a list": (list(range(80)), r"a list, not a torch tensor"),
}


@pytest.mark.parametrize("sample", [True, False], ids=["sampled drafts", "top-k drafts"])
@pytest.mark.parametrize("case", BAD_MAPPINGS, ids=list(BAD_MAPPINGS))
def test_a_bad_draft_to_target_is_refused_before_anything_is_drafted(llama, case, sample):
    """A repeated target id made sampled drafts come from another distribution (the id drew its duplicates' summed
    mass, the proposal row kept one of them): chi2=5827 on df=202 against the exact joint, with no error. The other
    breaks failed deep in torch, or only when such a token was drafted."""
    mapping, problem = BAD_MAPPINGS[case]
    drafter = _TargetCopyDrafter(llama, mapping)
    policy = hfas.StaticTreePolicy(2, 3, 7, sample_drafts=sample)
    message = rf"_TargetCopyDrafter\.draft_to_target is {problem}\. It must be a 1-D integer tensor .*distinct and in "
    with pytest.raises(ValueError, match=message + r"0\.\.95 .*one-to-one.*Fix the mapping _TargetCopyDrafter sets"):
        _speculative(llama, drafter, policy, do_sample=sample)
    assert drafter.drafted == 0


def test_a_one_to_one_mapping_and_no_mapping_still_decode_exactly(llama):
    permutation = torch.randperm(96, generator=torch.Generator().manual_seed(0))[:80]
    expected = _stock(llama)
    for mapping in (None, permutation, permutation.int(), torch.arange(96)):
        drafter = _TargetCopyDrafter(llama, mapping)
        out = _speculative(llama, drafter, hfas.StaticTreePolicy(2, 3, 7), do_sample=False)
        assert torch.equal(out, expected), mapping
        assert drafter.drafted > 0
    sampled = _speculative(llama, _TargetCopyDrafter(llama, permutation),
                           hfas.StaticTreePolicy(2, 3, 7, sample_drafts=True), do_sample=True)
    assert sampled.shape[1] == 9 + 12


def test_a_mapping_replaced_during_the_call_is_checked_too():
    drafter = _RowsDrafter(mapping=torch.tensor([0, 2, 3, 4]))
    builder = TreeBuilder(drafter, hfas.StaticTreePolicy(1, 2, 3), target_vocab_size=6)
    builder.build(CONTEXT, hfas.StaticTreePolicy(1, 2, 3).config, 1, DraftTimes())
    drafter.draft_to_target = torch.tensor([0, 2, 2, 4])
    with pytest.raises(ValueError, match=r"_RowsDrafter\.draft_to_target is not one-to-one"):
        builder.build(CONTEXT, hfas.StaticTreePolicy(1, 2, 3).config, 1, DraftTimes())


def test_a_mapping_as_long_as_the_rows_are_wide_is_required():
    drafter = _RowsDrafter(mapping=torch.tensor([0, 2, 3]))
    builder = TreeBuilder(drafter, hfas.StaticTreePolicy(1, 2, 3), target_vocab_size=6)
    with pytest.raises(ValueError, match=r"shape \[1, 4\]; it must return a floating-point torch\.Tensor of shape "
                                         r"\[1, 3\] .*the length of its draft_to_target"):
        builder.build(CONTEXT, hfas.StaticTreePolicy(1, 2, 3).config, 1, DraftTimes())


# 2. rows that are logits or probabilities, not log-probs


@pytest.mark.parametrize("tree", [(3, 3, 6), (2, 2, 6)])
def test_a_drafter_returning_logits_is_named_with_the_hook_and_the_fix(llama, tree):
    """The rerank assumes a child never scores above its parent; positive rows broke that, and the call failed in
    subtree() ('needs the root and every kept node's parent') for some tree sizes only."""
    drafter = _TargetCopyDrafter(llama, logits=True)
    with pytest.raises(ValueError, match=r"_TargetCopyDrafter\.begin_tree returned rows that are not "
                                         r"log-probabilities.*never scores above its parent.*torch\.log_softmax"):
        _speculative(llama, drafter, hfas.StaticTreePolicy(*tree), do_sample=False)


@pytest.mark.parametrize("hook", ["begin_tree", "expand"])
def test_the_hook_that_returned_positive_rows_is_named(hook):
    positive = torch.tensor([[2.0, 1.0, 0.5, 0.1]])
    drafter = _RowsDrafter(positive, lambda n: positive.repeat(n, 1)) if hook == "begin_tree" else _RowsDrafter(
        ROWS, lambda n: positive.repeat(n, 1)
    )
    policy = hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=3)
    builder = TreeBuilder(drafter, policy, target_vocab_size=4)
    with pytest.raises(ValueError, match=rf"_RowsDrafter\.{hook} returned rows that are not log-probabilities"):
        builder.build(CONTEXT, policy.config, 2, DraftTimes())


def test_a_rerank_failure_with_log_prob_rows_keeps_the_tree_error(monkeypatch):
    """When every child scores at most its parent, the rows are not to blame: the tree's own error is raised, as it
    was (not a copy of its message), with its traceback."""
    import hf_adaptive_spec.generation.tree_builder as tree_builder

    monkeypatch.setattr(tree_builder, "best_nodes", lambda tree, budget: [len(tree) - 1])  # a leaf, not its parent
    policy = hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=3)
    builder = TreeBuilder(_RowsDrafter(), policy, target_vocab_size=4)
    with pytest.raises(ValueError, match=r"^subtree\(\) needs the root and every kept node's parent\.$") as raised:
        builder.build(CONTEXT, policy.config, 2, DraftTimes())
    assert str(raised.traceback[-1].path).endswith("core/tree.py")  # raised where the tree found it


UNDRAWABLE = {"NaN": float("nan"), "+inf": float("inf")}


@pytest.mark.parametrize("bad", [*UNDRAWABLE, "all -inf"])
@pytest.mark.parametrize("hook", ["begin_tree", "expand"])
def test_sampled_drafts_from_rows_torch_cannot_draw_from_are_named(hook, bad):
    """A sampled tree draws from exp(rows): a NaN, +inf or all -inf row failed in torch.multinomial ('invalid
    multinomial distribution'), naming neither the drafter nor its hook."""
    broken = ROWS.clone()
    if bad in UNDRAWABLE:
        broken[0, 1] = UNDRAWABLE[bad]
    else:
        broken[:] = float("-inf")
    drafter = _RowsDrafter(broken) if hook == "begin_tree" else _RowsDrafter(ROWS, lambda n: broken.repeat(n, 1))
    policy = hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=7, sample_drafts=True)
    builder = TreeBuilder(drafter, policy, target_vocab_size=4)
    with pytest.raises(ValueError, match=rf"_RowsDrafter\.{hook}\(.*returned rows a sampled tree cannot draw from "
                                         r"\(invalid multinomial distribution.*torch\.log_softmax"):
        builder.build(CONTEXT, policy.config, 2, DraftTimes())


# 3. the rows' shapes


BAD_ROWS = {
    "1-D": (ROWS[0], r"a tensor of shape \[4\]"),
    "[1, 1, V]": (ROWS[None], r"a tensor of shape \[1, 1, 4\]"),
    "numpy": (ROWS.numpy(), r"a ndarray, not a torch\.Tensor"),
    "list": (ROWS.tolist(), r"a list, not a torch\.Tensor"),
    "[V, 1]": (ROWS.T, r"a tensor of shape \[4, 1\]"),
    "two rows": (ROWS.repeat(2, 1), r"a tensor of shape \[2, 4\]"),
    "integers": (torch.tensor([[3, 2, 1, 0]]), r"a torch\.int64 tensor of shape \[1, 4\]"),
}


@pytest.mark.parametrize("case", BAD_ROWS, ids=list(BAD_ROWS))
def test_begin_tree_rows_of_another_shape_are_refused(case):
    rows, got = BAD_ROWS[case]
    policy = hfas.StaticTreePolicy(2, 2, 5)
    builder = TreeBuilder(_RowsDrafter(rows), policy, target_vocab_size=4)
    with pytest.raises(ValueError, match=rf"_RowsDrafter\.begin_tree\(context\) returned {got}; it must return a "
                                         r"floating-point torch\.Tensor of shape \[1, V\]"):
        builder.build(CONTEXT, policy.config, 2, DraftTimes())


@pytest.mark.parametrize("rows", [lambda n: ROWS.repeat(n - 1, 1), lambda n: ROWS.repeat(n + 1, 1),
                                  lambda n: ROWS[:, :3].repeat(n, 1)], ids=["fewer", "more", "narrower"])
def test_expand_rows_of_another_shape_are_refused(rows):
    policy = hfas.StaticTreePolicy(2, 2, 5)
    builder = TreeBuilder(_RowsDrafter(ROWS, rows), policy, target_vocab_size=4)
    with pytest.raises(ValueError, match=r"_RowsDrafter\.expand\(tree, nodes\) for 2 nodes returned a tensor of "
                                         r"shape \[\d, \d\]; it must return a floating-point torch\.Tensor of "
                                         r"shape \[2, 4\]"):
        builder.build(CONTEXT, policy.config, 2, DraftTimes())


# 4. feature_layers


@pytest.mark.parametrize("layers", [3, (1.5,), ("a",), (True,), "2"])
@pytest.mark.parametrize("role", ["policy", "drafter"])
def test_feature_layers_that_are_not_ints_are_refused_naming_who_asked(llama, role, layers):
    policy, drafter = hfas.StaticTreePolicy(2, 2, 5), _TargetCopyDrafter(llama)
    (policy if role == "policy" else drafter).feature_layers = layers
    name = "StaticTreePolicy" if role == "policy" else "_TargetCopyDrafter"
    with pytest.raises(ValueError, match=rf"The {role} {name} asks for target hidden states feature_layers=.*must be "
                                         rf"a tuple \(or list\) of ints.*{name}\.feature_layers = "):
        _speculative(llama, drafter, policy, do_sample=False)
    assert drafter.drafted == 0


# 5. tree_config is required


class _NoTreeConfig(hfas.DraftPolicy):
    began = False

    def begin_generation(self):
        self.began = True


def test_a_policy_without_tree_config_is_refused_when_generate_starts(llama):
    policy = _NoTreeConfig()
    with pytest.raises(NotImplementedError, match=r"_NoTreeConfig must define tree_config\(self, state\) -> "
                                                  r"TreeConfig, the one hook every DraftPolicy needs"):
        _speculative(llama, _TargetCopyDrafter(llama), policy, do_sample=False)
    assert not policy.began
    with pytest.raises(NotImplementedError, match="_NoTreeConfig must define tree_config"):
        policy.tree_config(None)


# 6. num_tokens_to_verify: taken up to the tree's node count; the refusal states the range


class _Budget(hfas.StaticTreePolicy):
    def __init__(self, budget):
        super().__init__(2, 3, 8)
        self.budget = budget

    def num_tokens_to_verify(self, info):
        return self.budget


def test_a_budget_past_the_tree_verifies_it_all_and_a_huge_one_states_the_real_range(llama):
    expected = _stock(llama)
    assert torch.equal(_speculative(llama, _TargetCopyDrafter(llama), _Budget(100), do_sample=False), expected)
    with pytest.raises(ValueError, match=r"num_tokens_to_verify returned 1000000000000; expected an int in \[0, 7\] "
                                         r"\(this tree's total_tokens - 1; a larger int, up to 2\*\*30, verifies"):
        _speculative(llama, _TargetCopyDrafter(llama), _Budget(10**12), do_sample=False)


# 7. a policy class instead of an instance


def test_a_policy_class_is_refused_naming_it_and_the_call_to_make(llama):
    with pytest.raises(ValueError, match=r"got the class StaticTreePolicy itself: pass StaticTreePolicy\(\)"):
        _speculative(llama, _TargetCopyDrafter(llama), hfas.StaticTreePolicy, do_sample=False)
