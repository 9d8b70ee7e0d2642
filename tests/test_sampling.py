"""Speculative sampling draws from exactly the target distribution (after logits processors).

Tolerance: a chi-square goodness-of-fit test against the exact target probabilities must not
reject at p < 1e-4 (seeded, so deterministic). A deliberately broken acceptance rule is run
through the same test and must be rejected, which shows the test has power.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from stats_utils import chi_square
from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper

import hf_adaptive_spec as hfas
from hf_adaptive_spec.generation import acceptance

SMALL_VOCAB = 6
NEW_TOKENS = 3
SAMPLES = 1500
TREES = {
    "top-k tree": hfas.StaticTreePolicy(depth=2, top_k=3, total_tokens=10),
    "sampled tree": hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=7, sample_drafts=True),
}


def _small_target(seed: int, num_hidden_layers: int):
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=SMALL_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=num_hidden_layers,
        num_attention_heads=2, num_key_value_heads=1, initializer_range=0.15, eos_token_id=None, bos_token_id=None,
        pad_token_id=None,
    )
    return hfas.enable(LlamaForCausalLM(config).eval())


@pytest.fixture(scope="module")
def small_model():
    return _small_target(seed=1, num_hidden_layers=2)


def _exact_distribution(model, prompt_ids, processors) -> dict[tuple[int, ...], float]:
    """Exact probability of every NEW_TOKENS continuation under the processed target."""
    probs = {(): 1.0}
    for _ in range(NEW_TOKENS):
        prefixes = list(probs)
        batch = torch.cat(
            [prompt_ids.repeat(len(prefixes), 1), torch.tensor(prefixes, dtype=torch.long).view(len(prefixes), -1)], 1
        )
        with torch.no_grad():
            logits = model(batch).logits[:, -1].float()
        next_probs = torch.softmax(processors(batch, logits), dim=-1)
        probs = {
            p + (t,): probs[p] * float(next_probs[i, t]) for i, p in enumerate(prefixes) for t in range(SMALL_VOCAB)
        }
    return probs


def _sample(model, prompt_ids, drafter, policy, seed=0, **generate_kwargs) -> Counter:
    torch.manual_seed(seed)
    counts = Counter()
    for _ in range(SAMPLES):
        out = model.generate(
            prompt_ids, max_new_tokens=NEW_TOKENS, do_sample=True, temperature=0.8, top_k=4,
            assistant_model=drafter, assistant_policy=policy, **generate_kwargs,
        )
        counts[tuple(out[0, prompt_ids.shape[1] :].tolist())] += 1
    return counts


def _drafter(model):
    # a different model as drafter, so drafts are sometimes rejected
    torch.manual_seed(7)
    other = LlamaForCausalLM(model.config).eval()
    return hfas.CausalLMDrafter(other)


@pytest.fixture(scope="module")
def exact(small_model):
    prompt_ids = torch.tensor([[1, 4, 2]])
    processors = LogitsProcessorList([TemperatureLogitsWarper(0.8), TopKLogitsWarper(4)])
    return prompt_ids, _exact_distribution(small_model, prompt_ids, processors)


@pytest.mark.parametrize("tree", list(TREES))
def test_speculative_sampling_matches_exact_target(small_model, exact, tree):
    prompt_ids, probs = exact
    counts = _sample(small_model, prompt_ids, _drafter(small_model), TREES[tree])
    stat, critical = chi_square(counts, probs)
    assert stat < critical, f"{tree}: chi2={stat:.1f} >= {critical:.1f}"
    first = Counter()
    for seq, c in counts.items():
        first[seq[:1]] += c
    first_probs = Counter()
    for seq, p in probs.items():
        first_probs[seq[:1]] += p
    stat, critical = chi_square(first, dict(first_probs))
    assert stat < critical, f"{tree} next token: chi2={stat:.1f} >= {critical:.1f}"


@pytest.mark.parametrize("tree", list(TREES))
def test_sampling_on_the_static_cache_path_matches_exact_target(small_model, exact, tree):
    """The padded static-cache verification (cache_implementation='static') samples exactly too."""
    prompt_ids, probs = exact
    counts = _sample(small_model, prompt_ids, _drafter(small_model), TREES[tree], cache_implementation="static")
    stat, critical = chi_square(counts, probs)
    assert stat < critical, f"{tree}: chi2={stat:.1f} >= {critical:.1f}"


@pytest.mark.parametrize("tree", list(TREES))
def test_prompt_lookup_branch_keeps_sampling_exact(small_model, exact, tree):
    """Lookup nodes join top-k children as one more deterministic draft (q = one-hot); sampled
    sibling groups share one q, so sampled trees take no lookup nodes."""
    prompt_ids, probs = exact
    counts = _sample(small_model, prompt_ids, _drafter(small_model), TREES[tree], prompt_lookup_num_tokens=2)
    stat, critical = chi_square(counts, probs)
    assert stat < critical, f"chi2={stat:.1f} >= {critical:.1f}"


def _broken_rule(tree, scores_at, stops_after=None):
    """Accepts a drafted child with probability p(x) but forgets to remove it from the residual."""
    assert stops_after is None  # transformers' warpers alone: the walk's tokens are emitted after it
    node, path = 0, [0]
    while True:
        scores = scores_at(node)
        p = torch.softmax(scores.float(), dim=-1)
        accepted = next((c for c in tree.children(node) if torch.rand(()) < p[tree.tokens[c]]), None)
        if accepted is None:
            return acceptance.Acceptance(path, int(torch.multinomial(p, 1)), scores_at)
        path.append(accepted)
        node = accepted


@pytest.fixture(scope="module")
def eagle3_target():
    """A 4-layer target of the same vocabulary (EAGLE-3 reads three distinct layers), with its exact distribution."""
    model = _small_target(seed=3, num_hidden_layers=4)
    prompt_ids = torch.tensor([[1, 4, 2]])
    processors = LogitsProcessorList([TemperatureLogitsWarper(0.8), TopKLogitsWarper(4)])
    return model, prompt_ids, _exact_distribution(model, prompt_ids, processors)


def test_eagle3_drafter_of_two_layers_and_a_reduced_vocabulary_samples_exactly(eagle3_target):
    """An EAGLE-3 drafter whose draft vocabulary leaves out target tokens 1 and 5, in a sampled tree: its
    proposal probabilities reach the acceptance rule through the draft-to-target mapping (scattering
    them unmapped fails this test, chi2 4119 against 89), and its second decoder layer drafts from a
    cache of its own. (A top-k tree's drafts are deterministic, so no proposal probabilities.)"""
    from hf_adaptive_spec.drafters.eagle3 import Eagle3Drafter, Eagle3DraftModel

    model, prompt_ids, probs = eagle3_target
    torch.manual_seed(7)
    draft_model = Eagle3DraftModel.from_target(
        model, draft_to_target=torch.tensor([0, 2, 3, 4]), num_hidden_layers=2, initializer_range=0.3
    )
    counts = _sample(model, prompt_ids, Eagle3Drafter(draft_model.eval()), TREES["sampled tree"])
    stat, critical = chi_square(counts, probs)
    assert stat < critical, f"chi2={stat:.1f} >= {critical:.1f}"


def test_broken_acceptance_rule_fails_the_same_test(small_model, exact, monkeypatch):
    from hf_adaptive_spec.generation import speculative_decoding

    monkeypatch.setattr(speculative_decoding, "accept_sampling", _broken_rule)
    prompt_ids, probs = exact
    counts = _sample(small_model, prompt_ids, _drafter(small_model), TREES["top-k tree"])
    stat, critical = chi_square(counts, probs)
    assert stat > critical, f"the broken rule was not detected: chi2={stat:.1f} < {critical:.1f}"


def test_plain_sampling_passes_the_same_test(small_model, exact):
    """Calibration: stock multinomial sampling through the same statistic."""
    prompt_ids, probs = exact
    torch.manual_seed(0)
    counts = Counter()
    for _ in range(SAMPLES):
        out = small_model.generate(prompt_ids, max_new_tokens=NEW_TOKENS, do_sample=True, temperature=0.8, top_k=4)
        counts[tuple(out[0, prompt_ids.shape[1] :].tolist())] += 1
    stat, critical = chi_square(counts, probs)
    assert stat < critical


def test_sampled_tree_keeps_whole_sibling_groups():
    tree = hfas.DraftTree.with_root(0)
    tree.add_children(0, [1, 2], [-0.1, -0.2])
    tree.add_children(1, [3, 3], [-0.5, -0.6])
    tree.add_children(2, [4, 5], [-0.5, -0.6])
    from hf_adaptive_spec.generation.tree_builder import TreeBuilder

    assert TreeBuilder._whole_groups(tree, budget=5) == [0, 1, 2, 3, 4]
    assert TreeBuilder._whole_groups(tree, budget=3) == [0, 1, 2]
    assert TreeBuilder._whole_groups(tree, budget=1) == [0]


class _FixedDrafter(hfas.Drafter):
    """The same draft distribution at every node: q = [.6, .2, .1, .1]."""

    Q = torch.tensor([0.6, 0.2, 0.1, 0.1])

    def bind(self, target):
        return None

    def begin_tree(self, context):
        return self.Q.log()[None]

    def expand(self, tree, nodes):
        return self.Q.log()[None].repeat(len(nodes), 1)


class _ConfidenceGate(hfas.StaticTreePolicy):
    """A sampled chain of two drafts whose verification budget keeps the second only where its draft probability is
    above 0.5: a budget read from the sampled tokens themselves."""

    def __init__(self):
        super().__init__(depth=2, top_k=1, total_tokens=3, sample_drafts=True)

    def num_tokens_to_verify(self, info):
        confident = len(info.scores) == 2 and float(info.scores[1] - info.scores[0]) > -0.6931  # log 0.5
        return 2 if confident else 1


def test_a_sampled_tree_is_not_pruned_by_a_budget_read_from_its_own_drafts():
    """After the first draft is accepted, the next token must follow the target's p exactly. Were the policy's budget
    asked, the second draft would be verified only when it is the drafter's favourite token (q 0.6 against p 0.3), and
    the token after the first would be that one 0.42 of the time instead of 0.30."""
    from hf_adaptive_spec.drafters.base import DraftContext
    from hf_adaptive_spec.generation.tree_builder import DraftTimes, TreeBuilder

    p = torch.tensor([0.3, 0.3, 0.2, 0.2])
    policy = _ConfidenceGate()
    builder = TreeBuilder(_FixedDrafter(), policy, target_vocab_size=4)
    context = DraftContext(torch.tensor([[0, 1, 2]]), {}, None)
    torch.manual_seed(0)
    after_first = Counter()
    for _ in range(3000):
        tree = builder.build(context, policy.config, 2, DraftTimes())
        result = acceptance.accept_sampling(tree, lambda node: p.log())
        if len(result.path) >= 2:  # the first draft accepted: the token emitted after it
            after_first[tree.tokens[result.path[2]] if len(result.path) >= 3 else result.next_token] += 1
    stat, critical = chi_square(after_first, {token: float(p[token]) for token in range(4)})
    assert stat < critical, (after_first, stat, critical)


def test_a_policy_whose_budget_a_sampled_tree_does_not_ask_is_told_so(caplog):
    """The hook it overrides is not asked (the test above says why): a warning, once, says so and what to do."""
    import logging

    from hf_adaptive_spec.drafters.base import DraftContext
    from hf_adaptive_spec.generation.tree_builder import DraftTimes, TreeBuilder

    context = DraftContext(torch.tensor([[0, 1, 2]]), {}, None)
    logging.Logger.warning_once.cache_clear()  # transformers warns once per process
    with caplog.at_level(logging.WARNING):
        for policy in (hfas.StaticTreePolicy(depth=2, top_k=1, total_tokens=3, sample_drafts=True), _ConfidenceGate()):
            TreeBuilder(_FixedDrafter(), policy, target_vocab_size=4).build(context, policy.config, 2, DraftTimes())
    assert caplog.text.count("num_tokens_to_verify is not asked for sampled trees") == 1
    assert "_ConfidenceGate.num_tokens_to_verify" in caplog.text
