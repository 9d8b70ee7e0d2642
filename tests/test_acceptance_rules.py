"""The sampling acceptance rule, beyond the engine-level chi-square tests of tests/test_sampling.py: draft rows that are
not exact log-probs, the device reads per node, and lookup chains kept out of sampled sibling groups."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from stats_utils import chi_square
from torch.overrides import TorchFunctionMode

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.base import DraftContext
from hf_adaptive_spec.generation import acceptance
from hf_adaptive_spec.generation.prompt_lookup import graft_chain
from hf_adaptive_spec.generation.tree_builder import DraftTimes, TreeBuilder

P = torch.tensor([0.3, 0.3, 0.2, 0.2])  # the target's distribution at every node


class _ScaledDrafter(hfas.Drafter):
    """Draft rows ``log(scale * q)``, q = [.6, .2, .1, .1]: log-probs off by a constant, as a temperature applied to
    log-probs or a half-precision log_softmax leaves them (``torch.multinomial`` draws from q all the same)."""

    Q = torch.tensor([0.6, 0.2, 0.1, 0.1])

    def __init__(self, scale: float):
        self.rows = (self.Q * scale).log()[None]

    def bind(self, target):
        return None

    def begin_tree(self, context):
        return self.rows

    def expand(self, tree, nodes):
        return self.rows.repeat(len(nodes), 1)


@pytest.mark.parametrize("scale", [0.5, 1.3])
def test_sampled_drafts_from_unnormalised_rows_keep_the_target_distribution(scale):
    """The drafts come from normalise(exp(rows)); the acceptance ratio must use that, not exp(rows). Reading the rows
    as they are accepts p/q's wrong multiple: the first token's chi2 was 1600 (scale 0.5) and 243 (scale 1.3), against
    a critical 22."""
    stat, critical = _first_token_chi_square(_ScaledDrafter(scale), P)
    assert stat < critical, (stat, critical)


SAMPLED_TREE = hfas.StaticTreePolicy(depth=1, top_k=2, total_tokens=3, sample_drafts=True)
CONTEXT = DraftContext(torch.tensor([[0, 1, 2]]), {}, None)


def _first_token_chi_square(drafter: hfas.Drafter, target_p: torch.Tensor, draws: int = 4000) -> tuple[float, float]:
    """Chi-square of the first token sampled through a depth-1 sampled tree of ``drafter`` against ``target_p``."""
    builder = TreeBuilder(drafter, SAMPLED_TREE, target_vocab_size=len(target_p))
    torch.manual_seed(0)
    first = Counter()
    for _ in range(draws):
        tree = builder.build(CONTEXT, SAMPLED_TREE.config, 1, DraftTimes())
        result = acceptance.accept_sampling(tree, lambda node: target_p.log())
        first[tree.tokens[result.path[1]] if len(result.path) > 1 else result.next_token] += 1
    return chi_square(first, {token: float(target_p[token]) for token in range(len(target_p))})


class _DeviceReads(TorchFunctionMode):
    """Counts tensor reads to Python values (each one a synchronisation on a GPU)."""

    READS = frozenset({torch.Tensor.tolist, torch.Tensor.item, torch.Tensor.__bool__, torch.Tensor.__int__,
                       torch.Tensor.__float__, torch.Tensor.__index__})  # fmt: skip

    def __init__(self):
        super().__init__()
        self.reads = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.reads += func in self.READS
        return func(*args, **(kwargs or {}))


def _wide_tree(children: int, sampled: bool) -> hfas.DraftTree:
    """A root with ``children`` drafts of tokens 0..children-1, all of which the target's p rules out."""
    tree = hfas.DraftTree.with_root(0)
    tree.add_children(0, list(range(children)), [-1.0] * children)
    if sampled:
        tree.proposal_probs[0] = torch.full((2 * children,), 0.5 / children)
    return tree


@pytest.mark.parametrize("sampled", [False, True], ids=["top-k children", "sampled children"])
def test_sampling_acceptance_reads_the_device_once_per_node(sampled):
    """Eight rejected siblings cost 17 reads (a comparison and a residual check each, then the draw), each a GPU
    synchronisation; one read per node, as greedy's argmax, whatever the number of children."""
    children = 8
    scores = torch.full((2 * children,), float("-inf"))
    scores[children:] = 0.0  # p has no mass on any drafted token: every child is rejected
    torch.manual_seed(0)
    with _DeviceReads() as counter:
        result = acceptance.accept_sampling(_wide_tree(children, sampled), lambda node: scores)
    assert result.path == [0] and result.next_token >= children
    assert counter.reads == 1


def test_a_prompt_lookup_chain_is_not_grafted_among_sampled_siblings():
    """A grafted token below a node whose children were sampled would be read as one more draw from its draft
    distribution (biased); reusing the sampled nodes that spell the chain and extending below an unsampled one is
    fine."""
    tree = _wide_tree(2, sampled=True)
    with pytest.raises(ValueError, match="children were sampled"):
        graft_chain(tree, [3])
    assert graft_chain(tree, [1, 3]) == 1 and tree.tokens[-1] == 3 and tree.parents[-1] == 2


def test_a_causal_lm_drafter_refuses_a_model_without_its_lm_head():
    """A bare decoder (``LlamaModel``) used to pass and fail mid-generate with "'BaseModelOutputWithPast' object has no
    attribute 'logits'"; the error now names the model and the fix."""
    from tiny_models import tiny_model
    from transformers import LlamaModel

    decoder = LlamaModel(tiny_model("llama").config).eval()
    with pytest.raises(ValueError, match=r"needs a causal LM.*LlamaModel.*AutoModelForCausalLM"):
        hfas.CausalLMDrafter(decoder)


def test_a_drafter_narrower_than_the_target_samples_exactly_and_a_wider_one_is_refused():
    """Without draft_to_target a draft id is the target's: a drafter over the target's first 4 of 6 tokens put its rows
    in a 6-wide proposal with a shape error, mid-generate; one over more tokens than the target's drafts ids no
    verification can read."""
    stat, critical = _first_token_chi_square(_ScaledDrafter(1.0), torch.tensor([0.25, 0.25, 0.2, 0.1, 0.1, 0.1]))
    assert stat < critical, (stat, critical)
    wide = TreeBuilder(_ScaledDrafter(1.0), SAMPLED_TREE, target_vocab_size=3)
    with pytest.raises(ValueError, match="drafts over 4 tokens and the target has 3, with no draft_to_target"):
        wide.build(CONTEXT, SAMPLED_TREE.config, 1, DraftTimes())


def test_a_half_precision_proposal_is_normalised_in_float32():
    """A drafter's bfloat16 rows give a bfloat16 q; normalising it in bfloat16 rounded every ratio p/q (1/3 is
    0.33398 there): with p equal to the q the drafts came from, 42 of 20,000 drafts were rejected, and for other p
    the output was off by up to 2% of a token's probability (6 tokens, exact sums). Exact: none is rejected."""
    tree = hfas.DraftTree.with_root(0)
    tree.add_children(0, [0], [0.0])
    tree.proposal_probs[0] = torch.tensor([3.0, 3.0, 3.0], dtype=torch.bfloat16)  # multinomial draws from q = 1/3
    scores = torch.zeros(3)  # p = q
    torch.manual_seed(0)
    rejected = sum(len(acceptance.accept_sampling(tree, lambda node: scores).path) == 1 for _ in range(20000))
    assert rejected == 0
