"""Greedy speculative decoding returns exactly stock generate's tokens."""

from __future__ import annotations

import pytest
import torch
from tiny_models import FAMILIES, OTHER_LAYOUTS, PlainStepsBetweenTrees, prompt, tiny_eagle3, tiny_model

import hf_adaptive_spec as hfas

SHAPES = {
    "chain": hfas.StaticTreePolicy.chain(4),
    "wide": hfas.StaticTreePolicy(depth=2, top_k=8, total_tokens=16),
    "deep": hfas.StaticTreePolicy(depth=7, top_k=2, total_tokens=15),
    "pruned": hfas.StaticTreePolicy(depth=4, top_k=4, total_tokens=6),  # total_tokens below the tree size
    "eagle3-default": hfas.StaticTreePolicy(),
}


def _drafters(model):
    return {
        "self": hfas.CausalLMDrafter(model),  # always right: long accepted paths
        "early-exit": hfas.CausalLMDrafter.from_target_layers(model, 2),  # often wrong: rejections
    }


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("prompt_length", [1, 9, 33])
def test_tree_shapes_match_stock_greedy(family, prompt_length):
    model = tiny_model(family)
    ids = prompt(prompt_length, seed=prompt_length)
    expected = model.generate(ids, max_new_tokens=24, do_sample=False)
    for drafter_name, drafter in _drafters(model).items():
        for shape, policy in SHAPES.items():
            out = model.generate(ids, max_new_tokens=24, do_sample=False, assistant_model=drafter,
                                 assistant_policy=policy)
            assert torch.equal(out, expected), (family, drafter_name, shape)


@pytest.mark.parametrize("family", list(OTHER_LAYOUTS))
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_other_layouts_match_stock_greedy(family, cache):
    """GPT-2's layer stack and learned positions, Falcon's single key/value head and DeepSeek-V3's latent cache: on
    the static path the drafter's cache takes its shapes from the keys and values the model writes, not from its
    config (which said 4 heads of 16 for Falcon and DeepSeek: an index_copy_ error), and an early-exit drafter of a
    GPT-2 keeps 2 of its layers (it kept all 4)."""
    model = tiny_model(family)
    early_exit = hfas.CausalLMDrafter.from_target_layers(model, 2)
    assert len(early_exit.model.get_decoder().h if family != "deepseek-latent" else early_exit.model.model.layers) == 2
    static = {"cache_implementation": "static"} if cache == "static" else {}
    for length in (1, 9):
        ids = prompt(length, seed=length)
        expected = model.generate(ids, max_new_tokens=24, do_sample=False)
        for drafter in (hfas.CausalLMDrafter(model), early_exit):
            for policy in (SHAPES["wide"], SHAPES["eagle3-default"]):
                out = model.generate(ids, max_new_tokens=24, do_sample=False, assistant_model=drafter,
                                     assistant_policy=policy, **static)
                assert torch.equal(out, expected), (family, cache, length)


def test_self_drafter_chain_accepts_everything(llama):
    out = llama.generate(
        prompt(5),
        max_new_tokens=25,
        do_sample=False,
        assistant_model=hfas.CausalLMDrafter(llama),
        assistant_policy=hfas.StaticTreePolicy.chain(4),
        return_dict_in_generate=True,
    )
    assert out.speculation.accepted_lengths == [4] * 4 + [3]  # 1 prefill token + 4 * 5 + 4
    assert out.speculation.mean_accepted_tokens == pytest.approx(1 + 19 / 5)


class AlternateSkippingPolicy(hfas.StaticTreePolicy):
    """Verifies no candidate every other cycle (a one-token step), 3 candidates otherwise."""

    def __init__(self):
        super().__init__(depth=2, top_k=3, total_tokens=8)
        self.cycle = 0

    def num_tokens_to_verify(self, info):
        self.cycle += 1
        return 0 if self.cycle % 2 else 3


def test_verifying_no_candidate_is_a_one_token_step(llama):
    ids = prompt(9, seed=4)
    expected = llama.generate(ids, max_new_tokens=20, do_sample=False)
    out = llama.generate(
        ids,
        max_new_tokens=20,
        do_sample=False,
        assistant_model=hfas.CausalLMDrafter(llama),
        assistant_policy=AlternateSkippingPolicy(),
        return_dict_in_generate=True,
    )
    assert torch.equal(out.sequences, expected)
    stats = out.speculation
    assert stats.verified_tokens[0::2] == [1] * len(stats.verified_tokens[0::2])
    assert stats.accepted_lengths[0::2] == [0] * len(stats.accepted_lengths[0::2])
    assert stats.verified_tokens[1::2][:3] == [4, 4, 4]


def test_eos_inside_a_draft_stops_at_the_same_token(llama):
    ids = prompt(6, seed=3)
    free = llama.generate(ids, max_new_tokens=30, do_sample=False)
    eos = int(free[0, ids.shape[1] + 9])  # a token generated mid-way, inside some accepted block
    expected = llama.generate(ids, max_new_tokens=30, do_sample=False, eos_token_id=eos)
    assert expected.shape[1] < free.shape[1]
    out = llama.generate(
        ids,
        max_new_tokens=30,
        do_sample=False,
        eos_token_id=eos,
        assistant_model=hfas.CausalLMDrafter(llama),
        assistant_policy=hfas.StaticTreePolicy.chain(6),
    )
    assert torch.equal(out, expected)


def test_several_eos_ids(llama):
    ids = prompt(6, seed=4)
    free = llama.generate(ids, max_new_tokens=30, do_sample=False)[0, ids.shape[1] :].tolist()
    eos_ids = [free[12], free[7]]
    expected = llama.generate(ids, max_new_tokens=30, do_sample=False, eos_token_id=eos_ids)
    out = llama.generate(
        ids, max_new_tokens=30, do_sample=False, eos_token_id=eos_ids,
        assistant_model=hfas.CausalLMDrafter(llama),
        assistant_policy=hfas.StaticTreePolicy(depth=5, top_k=2, total_tokens=9),
    )
    assert torch.equal(out, expected)


@pytest.mark.parametrize("max_new_tokens", [1, 2, 7, 13])
def test_max_new_tokens_inside_an_accepted_block(llama, max_new_tokens):
    ids = prompt(4, seed=5)
    expected = llama.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
    out = llama.generate(
        ids, max_new_tokens=max_new_tokens, do_sample=False,
        assistant_model=hfas.CausalLMDrafter(llama), assistant_policy=hfas.StaticTreePolicy.chain(5),
    )
    assert out.shape[1] == ids.shape[1] + max_new_tokens
    assert torch.equal(out, expected)


def test_max_length_is_honoured(llama):
    ids = prompt(4, seed=6)
    expected = llama.generate(ids, max_length=15, do_sample=False)
    out = llama.generate(
        ids, max_length=15, do_sample=False,
        assistant_model=hfas.CausalLMDrafter(llama), assistant_policy=hfas.StaticTreePolicy.chain(5),
    )
    assert torch.equal(out, expected)


@pytest.mark.parametrize(
    "processing",
    [{"repetition_penalty": 1.8}, {"no_repeat_ngram_size": 2}, {"repetition_penalty": 1.3, "no_repeat_ngram_size": 3}],
)
def test_logits_processors_match(llama, processing):
    ids = prompt(8, seed=7)
    expected = llama.generate(ids, max_new_tokens=30, do_sample=False, **processing)
    for drafter in _drafters(llama).values():
        out = llama.generate(
            ids, max_new_tokens=30, do_sample=False, **processing,
            assistant_model=drafter, assistant_policy=hfas.StaticTreePolicy(depth=4, top_k=3, total_tokens=10),
        )
        assert torch.equal(out, expected)


def test_eager_attention_matches(llama):
    model = tiny_model("llama", attn_implementation="eager")
    ids = prompt(8, seed=8)
    expected = model.generate(ids, max_new_tokens=20, do_sample=False)
    out = model.generate(
        ids, max_new_tokens=20, do_sample=False,
        assistant_model=hfas.CausalLMDrafter.from_target_layers(model, 2),
        assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=8),
    )
    assert torch.equal(out, expected)


def test_scores_and_logits_match_stock(llama):
    ids = prompt(5, seed=9)
    kwargs = dict(max_new_tokens=12, do_sample=False, return_dict_in_generate=True, output_scores=True,
                  output_logits=True)
    expected = llama.generate(ids, **kwargs)
    out = llama.generate(ids, **kwargs, assistant_model=hfas.CausalLMDrafter(llama),
                         assistant_policy=hfas.StaticTreePolicy.chain(3))
    assert torch.equal(out.sequences, expected.sequences)
    assert len(out.scores) == len(expected.scores) == 12
    for ours, theirs in zip(out.scores, expected.scores):
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)
    for ours, theirs in zip(out.logits, expected.logits):
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


def test_verification_runs_the_lm_head_only_on_visited_nodes(llama):
    rows = []
    handle = llama.lm_head.register_forward_hook(lambda module, args, output: rows.append(args[0].shape[-2]))
    try:
        out = llama.generate(
            prompt(6, seed=21), max_new_tokens=12, do_sample=False, return_dict_in_generate=True,
            assistant_model=hfas.CausalLMDrafter(tiny_model("llama", seed=1)),  # its own lm_head, not counted
            assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=4, total_tokens=12),
        )
    finally:
        handle.remove()
    stats = out.speculation
    verified_rows = sum(rows[2:])  # rows[0]: the prefill's last position, rows[1]: the lazy-head check
    assert verified_rows == sum(stats.accepted_lengths) + stats.cycles < sum(stats.verified_tokens)


def test_models_with_logit_softcapping_keep_full_logits():
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    config = Gemma2Config(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, final_logit_softcapping=5.0,
                          attn_logit_softcapping=None, sliding_window=6, initializer_range=0.3, eos_token_id=None,
                          bos_token_id=None, pad_token_id=None)
    model = hfas.enable(Gemma2ForCausalLM(config).eval())
    model.set_attn_implementation("eager")
    ids = prompt(9, seed=22)
    expected = model.generate(ids, max_new_tokens=20, do_sample=False)
    out = model.generate(ids, max_new_tokens=20, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
                         assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6))
    assert torch.equal(out, expected)


OTHER_NORM_LAYOUTS = {  # the final norm is not the decoder's `norm`
    "opt": dict(ffn_dim=128, word_embed_proj_dim=64, init_std=0.3),  # decoder.final_layer_norm
    "gpt_neox": dict(intermediate_size=128, initializer_range=0.3),  # final_layer_norm
    "phi": dict(intermediate_size=128, initializer_range=0.3),  # final_layernorm
}


@pytest.mark.parametrize("architecture", list(OTHER_NORM_LAYOUTS))
def test_targets_whose_final_norm_has_another_name(architecture):
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(architecture, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                                  vocab_size=96, **OTHER_NORM_LAYOUTS[architecture])
    model = hfas.enable(AutoModelForCausalLM.from_config(config).eval())
    ids = prompt(6, seed=3)
    expected = model.generate(ids, max_new_tokens=20, do_sample=False)
    out = model.generate(ids, max_new_tokens=20, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
                         assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=8))
    assert torch.equal(out, expected)


@pytest.mark.parametrize("drafter_name", ["self", "early-exit"])
def test_plain_decoding_steps_between_trees(llama, drafter_name):
    """Depth-0 cycles draft nothing and verify the root alone; the drafter catches up after them."""
    ids = prompt(9, seed=5)
    expected = llama.generate(ids, max_new_tokens=24, do_sample=False)
    drafter = _drafters(llama)[drafter_name]
    trees_begun = []
    begin_tree = drafter.begin_tree
    drafter.begin_tree = lambda context: trees_begun.append(context) or begin_tree(context)
    out = llama.generate(
        ids,
        max_new_tokens=24,
        do_sample=False,
        assistant_model=drafter,
        assistant_policy=PlainStepsBetweenTrees(),
        return_dict_in_generate=True,
    )
    assert torch.equal(out.sequences, expected)
    stats = out.speculation
    assert all(context.input_ids.shape[1] % 3 == 0 for context in trees_begun)  # the drafter ran in tree cycles only
    plain_steps = stats.cycles - len(trees_begun)
    assert plain_steps > 0 and len(trees_begun) > 0
    assert stats.verified_tokens.count(1) >= plain_steps


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_a_tree_of_the_root_alone_drafts_nothing_and_the_drafter_catches_up(llama, cache):
    """A tree of ``total_tokens=1`` verifies the root alone whatever its ``depth`` (Re-SpS's grid holds such
    actions): the drafter does not run, so the engine keeps the target features it has yet to read, as after a
    depth-0 cycle. EAGLE-3 reads each committed token's features once; dropping them failed the next tree."""
    ids = prompt(9, seed=5)
    expected = llama.generate(ids, max_new_tokens=24, do_sample=False)
    root_alone = hfas.TreeConfig(depth=2, top_k=1, total_tokens=1)
    policy = PlainStepsBetweenTrees()
    policy.tree_config = lambda state: (policy.tree if state.context_length % 3 == 0 else root_alone)
    extra = {"cache_implementation": "static"} if cache == "static" else {}
    out = llama.generate(ids, max_new_tokens=24, do_sample=False, assistant_model=tiny_eagle3(llama),
                         assistant_policy=policy, return_dict_in_generate=True, **extra)
    assert torch.equal(out.sequences, expected)
    assert 0 < out.speculation.verified_tokens.count(1) < out.speculation.cycles
