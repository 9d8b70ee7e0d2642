"""The method registry and each method's wiring, on the tiny model."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from hf_adaptive_spec.bench.arguments import MethodOptions
from hf_adaptive_spec.bench.counting import TargetPassCounter
from hf_adaptive_spec.bench.errors import UnknownMethodError
from hf_adaptive_spec.bench.methods import METHODS, build_methods, hf_assistant, learned_policies
from hf_adaptive_spec.bench.methods.lookup_branch import WithLookupBranch

OPTIONS = MethodOptions(max_new_tokens=12, early_exit_layers=1, drafter_layers=1, num_assistant_tokens=4)


def prompt(tokenizer) -> torch.LongTensor:
    return torch.tensor([tokenizer.encode("<|im_start|>user\nhello there<|im_end|>\n")])


def stock_tokens(model, tokenizer) -> list[int]:
    method = METHODS["stock"]()
    method.prepare(model, tokenizer, OPTIONS)
    tokens, stats = method.generate(prompt(tokenizer))
    assert stats is None and 1 <= len(tokens) <= OPTIONS.max_new_tokens
    return tokens


def test_registry_names():
    assert list(METHODS) == [
        "stock", "stock-compiled", "hf-prompt-lookup", "hf-early-exit", "hf-assistant", "tree", "plain-steps",
        "eagle3", "eagle3-candidate", "eagle3-lookup-first", "eagle3-default-tree", "eagle3-confidence",
        "eagle3-heuristic", "eagle3-ltd", "eagle3-resps", "eagle3-radar", "eagle3-candidate-policy", "dvi",
    ]
    assert all(name == cls.name for name, cls in METHODS.items())


def test_unknown_method_lists_the_known_ones():
    with pytest.raises(UnknownMethodError, match="'ppow'.*known methods: stock, stock-compiled, hf-prompt-lookup"):
        build_methods(["stock", "ppow"])


def test_stock_is_always_first_and_added_when_missing():
    assert list(build_methods(["hf-prompt-lookup", "hf-prompt-lookup"])) == ["stock", "hf-prompt-lookup"]
    assert list(build_methods(["hf-prompt-lookup", "stock"])) == ["stock", "hf-prompt-lookup"]


@pytest.mark.parametrize("name", ["hf-prompt-lookup", "hf-early-exit"])
def test_builtin_methods_match_stock(bench_model, name: str):
    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    method = METHODS[name]()
    method.prepare(model, tokenizer, OPTIONS)
    assert method.generate(prompt(tokenizer)) == (expected, None)


@pytest.mark.parametrize("layers", [0, -1, "all"])
def test_early_exit_outside_the_targets_layers_is_refused(bench_model, layers):
    """transformers drafts nothing with 0 or with every layer: the run would be plain decoding under another name."""
    model, tokenizer = bench_model
    num_layers = model.config.num_hidden_layers
    options = dataclasses.replace(OPTIONS, early_exit_layers=num_layers if layers == "all" else layers)
    with pytest.raises(ValueError, match=rf"must be in 1\.\.{num_layers - 1} for this {num_layers}-layer model"):
        METHODS["hf-early-exit"]().prepare(model, tokenizer, options)


def test_early_exit_sets_the_draft_length_on_the_model_config(bench_model):
    model, tokenizer = bench_model
    METHODS["hf-early-exit"]().prepare(model, tokenizer, OPTIONS)
    assert model.generation_config.num_assistant_tokens == 4
    assert model.generation_config.assistant_confidence_threshold is None  # unset: transformers' default


def test_hf_assistant_with_a_perfect_drafter_needs_fewer_target_passes(bench_model, monkeypatch):
    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    clone = copy.deepcopy(model)
    monkeypatch.setattr(hf_assistant, "truncated_causal_lm", lambda target, num_layers: clone)
    method = METHODS["hf-assistant"]()
    method.prepare(model, tokenizer, OPTIONS)
    assert method.generate_kwargs["assistant_model"] is clone
    assert clone.generation_config.num_assistant_tokens == 4
    counter = TargetPassCounter(model)
    tokens, _ = method.generate(prompt(tokenizer))
    counter.close()
    assert tokens == expected
    assert len(expected) > 4, "the tiny model should not stop this early"
    assert counter.count < len(tokens)


def test_target_pass_counter_counts_one_pass_per_stock_token(bench_model):
    model, tokenizer = bench_model
    counter = TargetPassCounter(model)
    tokens = stock_tokens(model, tokenizer)
    assert counter.count == len(tokens)
    counter.reset()
    assert counter.count == 0
    counter.close()
    stock_tokens(model, tokenizer)
    assert counter.count == 0


def test_tree_with_the_real_engine_matches_stock(bench_model):
    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    method = METHODS["tree"]()
    method.prepare(model, tokenizer, MethodOptions(max_new_tokens=12, drafter_layers=1, tree_depth=3, tree_top_k=2))
    tokens, stats = method.generate(prompt(tokenizer))
    assert tokens == expected
    assert len(stats.accepted_lengths) >= 1 and stats.verify_time > 0


def test_plain_steps_match_stock_without_drafting(bench_model):
    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    method = METHODS["plain-steps"]()
    method.prepare(model, tokenizer, OPTIONS)
    tokens, stats = method.generate(prompt(tokenizer))
    assert tokens == expected
    assert set(stats.draft_depths) == {0} and set(stats.verified_tokens) == {1} and stats.draft_time == 0


def test_lookup_suffix_grafts_the_branch_onto_a_tree_method(bench_model):
    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    methods = build_methods(["plain-steps+lookup"])
    assert list(methods) == ["stock", "plain-steps+lookup"]
    method = methods["plain-steps+lookup"]
    method.prepare(model, tokenizer, dataclasses.replace(OPTIONS, lookup_tokens=3, lookup_ngram_size=1))
    assert (method.generate_kwargs["prompt_lookup_num_tokens"] == 3
            and method.generate_kwargs["max_matching_ngram_size"] == 1)
    tokens, stats = method.generate(prompt(tokenizer))
    assert tokens == expected
    assert set(stats.draft_depths) == {0} and max(stats.verified_tokens) > 1  # lookup nodes on plain steps


def test_lookup_suffix_with_a_length_sets_the_branch_of_that_method_alone(bench_model):
    """``+lookupN``: N tokens for that method, ``--lookup-tokens`` for the plain ``+lookup`` beside it."""
    model, tokenizer = bench_model
    methods = build_methods(["plain-steps+lookup", "plain-steps+lookup2", "tree@1/2/2+lookup5+sized"])
    assert list(methods) == ["stock", "plain-steps+lookup", "plain-steps+lookup2", "tree@1/2/2+lookup5+sized"]
    options = dataclasses.replace(OPTIONS, lookup_tokens=3)
    for name in ("plain-steps+lookup", "plain-steps+lookup2"):
        methods[name].prepare(model, tokenizer, options)
    assert methods["plain-steps+lookup"].generate_kwargs["prompt_lookup_num_tokens"] == 3
    assert methods["plain-steps+lookup2"].generate_kwargs["prompt_lookup_num_tokens"] == 2
    shaped = methods["tree@1/2/2+lookup5+sized"]
    assert shaped.lookup_tokens == 5 and shaped.tree_shape == (1, 2, 2) and shaped.sized_cache
    with pytest.raises(UnknownMethodError, match=r"drop \+lookup0"):
        build_methods(["tree+lookup0"])


def test_lookup_suffix_needs_a_tree_method(bench_model):
    from hf_adaptive_spec.bench.errors import MethodUnavailableError

    model, tokenizer = bench_model
    with pytest.raises(MethodUnavailableError,
                       match=r"hf-prompt-lookup\+lookup: \+lookup extends this project's tree methods"):
        build_methods(["hf-prompt-lookup+lookup"])["hf-prompt-lookup+lookup"].prepare(model, tokenizer, OPTIONS)
    with pytest.raises(UnknownMethodError, match="'ppow\\+lookup'"):
        build_methods(["ppow+lookup"])


def test_tree_shape_suffix_gives_a_method_its_own_tree(bench_model):
    """``<method>@D/K/N`` overrides ``--tree-*`` for that method alone, with ``+lookup`` and ``+sized`` after it."""
    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    methods = build_methods(["tree", "tree@3/2/5", "tree@1/3/3+lookup"])
    assert list(methods) == ["stock", "tree", "tree@3/2/5", "tree@1/3/3+lookup"]
    options = dataclasses.replace(OPTIONS, tree_depth=2, tree_top_k=4, tree_total_tokens=8)
    configs = {}
    for name in ("tree", "tree@3/2/5", "tree@1/3/3+lookup"):
        methods[name].prepare(model, tokenizer, options)
        config = methods[name].generate_kwargs["assistant_policy"].config
        configs[name] = (config.depth, config.top_k, config.total_tokens)
    assert configs == {"tree": (2, 4, 8), "tree@3/2/5": (3, 2, 5), "tree@1/3/3+lookup": (1, 3, 3)}
    assert "prompt_lookup_num_tokens" in methods["tree@1/3/3+lookup"].generate_kwargs
    tokens, stats = methods["tree@3/2/5"].generate(prompt(tokenizer))
    assert tokens == expected and max(stats.draft_depths) <= 3 and max(stats.verified_tokens) <= 5
    sized = build_methods(["eagle3@3/8/8+lookup+sized"])["eagle3@3/8/8+lookup+sized"]
    assert sized.sized_cache and sized.tree_shape == (3, 8, 8) and sized.name == "eagle3@3/8/8+lookup+sized"
    assert not sized.in_float32


def test_float32_suffix_comes_last_and_keeps_the_other_suffixes():
    """``+fp32`` after ``@D/K/N``, ``+lookup`` and ``+sized``: the same method, on the run's float32 model."""
    name = "eagle3@1/4/2+lookup+sized+fp32"
    method = build_methods([name, "stock-compiled+fp32"])[name]
    assert method.in_float32 and method.sized_cache and method.tree_shape == (1, 4, 2) and method.name == name
    assert isinstance(method, WithLookupBranch)
    assert build_methods(["stock-compiled+fp32"])["stock-compiled+fp32"].in_float32
    with pytest.raises(UnknownMethodError, match=r"then \+fp32 to run it in float32"):
        build_methods(["eagle3+fp32+sized"])


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("plain-steps@1/1/2", r"sets the static tree of tree, eagle3, eagle3-candidate, eagle3-lookup-first; "
                              r"plain-steps does not draft one"),
        ("eagle3-radar@2/4/8+lookup", r"eagle3-radar does not draft one"),
        ("eagle3@3/8", r"write the tree as eagle3@DEPTH/TOP_K/TOKENS, e\.g\. eagle3@3/8/8"),
        ("eagle3@3/8/x", r"DEPTH/TOP_K/TOKENS"),
        ("ppow@1/1/1", r"unknown method\(s\) 'ppow@1/1/1'.*@D/K/N"),
    ],
)
def test_tree_shape_suffix_refuses_what_it_cannot_mean(name: str, message: str):
    with pytest.raises(UnknownMethodError, match=message):
        build_methods([name])


def test_an_impossible_tree_shape_names_the_method(bench_model):
    """A shape the tree cannot take is refused when the method is prepared, as ``--tree-*`` would be."""
    model, tokenizer = bench_model
    with pytest.raises(ValueError, match="total_tokens"):
        build_methods(["tree@2/4/0"])["tree@2/4/0"].prepare(model, tokenizer, OPTIONS)


def test_eagle3_with_a_checkpoint_matches_stock(bench_model, tmp_path):
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    torch.manual_seed(0)
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "drafter")
    method = METHODS["eagle3"]()
    options = MethodOptions(max_new_tokens=12, tree_depth=3, tree_top_k=2, tree_total_tokens=6,
                            eagle3_checkpoint=str(tmp_path / "drafter"))
    method.prepare(model, tokenizer, options)
    tokens, stats = method.generate(prompt(tokenizer))
    assert tokens == expected and len(stats.accepted_lengths) >= 1


def test_eagle3_candidate_runs_its_own_drafter_and_needs_one(bench_model, tmp_path):
    from hf_adaptive_spec.bench.errors import MethodUnavailableError
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    torch.manual_seed(1)
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "candidate")
    method = METHODS["eagle3-candidate"]()
    with pytest.raises(MethodUnavailableError, match="--candidate-checkpoint"):
        method.prepare(model, tokenizer, OPTIONS)
    options = MethodOptions(max_new_tokens=12, tree_depth=3, tree_top_k=2, tree_total_tokens=6,
                            candidate_checkpoint=str(tmp_path / "candidate"))
    method.prepare(model, tokenizer, options)
    drafter = method.generate_kwargs["assistant_model"]
    assert drafter.model.config.aux_hidden_state_layer_ids == [1, 2, 3]
    tokens, _ = method.generate(prompt(tokenizer))
    assert tokens == expected


def test_eagle3_lookup_first_runs_only_with_the_branch_and_drafts_where_it_missed(bench_model, tmp_path):
    from hf_adaptive_spec import LookupFirstPolicy
    from hf_adaptive_spec.bench.errors import MethodUnavailableError
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    torch.manual_seed(0)
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "drafter")
    options = MethodOptions(max_new_tokens=12, tree_depth=3, tree_top_k=2, tree_total_tokens=6, lookup_tokens=2,
                            eagle3_checkpoint=str(tmp_path / "drafter"))
    with pytest.raises(MethodUnavailableError,
                       match=r"run eagle3-lookup-first\+lookup \(without the branch it is eagle3\)"):
        build_methods(["eagle3-lookup-first"])["eagle3-lookup-first"].prepare(model, tokenizer, options)
    method = build_methods(["eagle3-lookup-first@1/2/2+lookup"])["eagle3-lookup-first@1/2/2+lookup"]
    method.prepare(model, tokenizer, options)
    policy = method.generate_kwargs["assistant_policy"]
    assert isinstance(policy, LookupFirstPolicy) and (policy.config.depth, policy.config.total_tokens) == (1, 2)
    assert method.generate_kwargs["prompt_lookup_num_tokens"] == 2
    tokens, _ = method.generate(prompt(tokenizer))
    assert tokens == expected


def test_eagle3_without_the_shipped_checkpoint_names_it(bench_model, monkeypatch, tmp_path):
    from hf_adaptive_spec import checkpoints
    from hf_adaptive_spec.bench.errors import MethodUnavailableError

    monkeypatch.setitem(checkpoints.SHIPPED, "eagle3", "no-such-folder")
    model, tokenizer = bench_model
    with pytest.raises(MethodUnavailableError, match="shipped eagle3 checkpoint is missing"):
        METHODS["eagle3"]().prepare(model, tokenizer, OPTIONS)


def test_dvi_learning_online_matches_stock(bench_model):
    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    method = METHODS["dvi"]()
    method.prepare(model, tokenizer, MethodOptions(max_new_tokens=12, dvi_exit_layer=1, dvi_depth=2))
    tokens, stats = method.generate(prompt(tokenizer))
    assert tokens == expected and method.generate_kwargs["assistant_model"].online
    assert len(stats.accepted_lengths) >= 1 and max(stats.draft_depths) == 2  # chains of --dvi-depth


def test_a_dvi_adapters_digest_is_kept_with_or_without_the_lookup_branch(bench_model, tmp_path):
    """A resumed run compares what each method loaded; ``+lookup`` dropped the DVI adapter's digest, so an adapter
    retrained at its path went unnoticed under ``dvi+lookup`` (found by a review)."""
    from hf_adaptive_spec import DVIDrafter

    model, tokenizer = bench_model
    DVIDrafter(model, exit_layer=1).save_pretrained(tmp_path / "adapter")
    options = MethodOptions(max_new_tokens=4, dvi_adapter=str(tmp_path / "adapter"), dvi_depth=2)
    plain, with_lookup = METHODS["dvi"](), WithLookupBranch(METHODS["dvi"](), 2)
    plain.prepare(model, tokenizer, options)
    with_lookup.prepare(model, tokenizer, options)
    assert "adapter" in plain.loaded_digests() and with_lookup.loaded_digests() == plain.loaded_digests()


@pytest.mark.parametrize(
    "name",
    ["eagle3-default-tree", "eagle3-confidence", "eagle3-heuristic", "eagle3-ltd", "eagle3-radar", "eagle3-resps",
     "eagle3-candidate-policy"],
)
def test_eagle3_with_other_policies_matches_stock(bench_model, tmp_path, name):
    from hf_adaptive_spec import (
        ConfidenceThresholdPolicy,
        HeuristicLengthPolicy,
        LTDPolicy,
        RadarPolicy,
        ReSpSPolicy,
        StaticTreePolicy,
    )
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    model, tokenizer = bench_model
    expected = stock_tokens(model, tokenizer)
    torch.manual_seed(0)
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "drafter")
    policies = {
        "eagle3-ltd": ("ltd_policy", LTDPolicy(depth=3, top_k=2, total_tokens=6)),
        "eagle3-candidate-policy": ("candidate_policy", LTDPolicy(depth=2, top_k=2, total_tokens=4)),
        "eagle3-radar": ("radar_policy", RadarPolicy(depth=3, top_k=2, total_tokens=6)),
        "eagle3-resps": (
            "resps_policy",
            ReSpSPolicy(hidden_size=model.config.hidden_size, num_target_layers=4, feature_layers=(1, 2, 3)),
        ),
    }
    fields = {"eagle3_checkpoint": str(tmp_path / "drafter")}
    if name in policies:
        option, policy = policies[name]
        policy.save_pretrained(tmp_path / "policy")
        fields[option] = str(tmp_path / "policy")
    method = METHODS[name]()
    method.prepare(model, tokenizer, MethodOptions(max_new_tokens=12, **fields))
    tokens, stats = method.generate(prompt(tokenizer))
    assert tokens == expected and len(stats.accepted_lengths) >= 1
    heuristics = {"eagle3-confidence": ConfidenceThresholdPolicy, "eagle3-heuristic": HeuristicLengthPolicy}
    expected_type = type(policies[name][1]) if name in policies else heuristics.get(name, StaticTreePolicy)
    assert type(method.generate_kwargs["assistant_policy"]) is expected_type


def test_eagle3_methods_of_a_run_share_one_drafter_per_checkpoint(bench_model, tmp_path):
    """Each drafter object compiles its own graphs under freezing; one per method hit dynamo's graph limit."""
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    model, tokenizer = bench_model
    torch.manual_seed(0)
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "drafter")
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "candidate")
    options = MethodOptions(
        max_new_tokens=12, eagle3_checkpoint=str(tmp_path / "drafter"), candidate_checkpoint=str(tmp_path / "candidate")
    )
    drafters = {}
    for name in ("eagle3", "eagle3-heuristic", "eagle3-default-tree", "eagle3-candidate"):
        method = METHODS[name]()
        method.prepare(model, tokenizer, options)
        drafters[name] = method.generate_kwargs["assistant_model"]
    assert drafters["eagle3"] is drafters["eagle3-heuristic"] is drafters["eagle3-default-tree"]
    assert drafters["eagle3-candidate"] is not drafters["eagle3"]


def test_learned_policy_without_a_checkpoint_names_the_option(bench_model, monkeypatch, tmp_path):
    from hf_adaptive_spec import checkpoints
    from hf_adaptive_spec.bench.errors import MethodUnavailableError
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    monkeypatch.setitem(checkpoints.SHIPPED, "ltd", "no-such-folder")
    monkeypatch.setattr(learned_policies, "shipped_policies_misfit", lambda model, drafter: None)  # as if theirs
    model, tokenizer = bench_model
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "drafter")
    options = MethodOptions(max_new_tokens=12, eagle3_checkpoint=str(tmp_path / "drafter"))
    with pytest.raises(MethodUnavailableError, match="shipped ltd checkpoint is missing.*--ltd-policy"):
        METHODS["eagle3-ltd"]().prepare(model, tokenizer, options)
    with pytest.raises(MethodUnavailableError, match="eagle3-candidate-policy needs --candidate-policy PATH"):
        METHODS["eagle3-candidate-policy"]().prepare(model, tokenizer, options)  # it has no shipped policy


@pytest.mark.parametrize("name", ["eagle3-ltd", "eagle3-resps", "eagle3-radar"])
def test_the_shipped_policies_are_refused_for_another_target_or_drafter(bench_model, tmp_path, name):
    """Trained for SmolLM2-135M-Instruct with its shipped drafter: with another model (and its drafter) the method
    needs its policy passed, and the error names the option."""
    from hf_adaptive_spec.bench.errors import MethodUnavailableError
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    model, tokenizer = bench_model
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "drafter")
    options = MethodOptions(max_new_tokens=12, eagle3_checkpoint=str(tmp_path / "drafter"))
    policy = name.removeprefix("eagle3-")
    with pytest.raises(MethodUnavailableError, match=rf"{name}: the shipped policies were trained for "
                       rf"HuggingFaceTB/SmolLM2-135M-Instruct .* not for the target .*tiny-llama.*"
                       rf"Pass --{policy}-policy PATH"):
        METHODS[name]().prepare(model, tokenizer, options)


def test_learned_policy_methods_take_the_variant_shipped_for_the_runs_curve(bench_model, monkeypatch, tmp_path):
    from hf_adaptive_spec import checkpoints
    from hf_adaptive_spec.core import CostCurve
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
    from hf_adaptive_spec.policies import RadarPolicy

    model, tokenizer = bench_model
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "drafter")
    variant = RadarPolicy(depth=2, top_k=2, total_tokens=4)
    variant.mark_trained_on(CostCurve("cpu", "float32", "eager"))  # the curve of a bench run without --compile
    variant.save_pretrained(tmp_path / "radar-eager")
    monkeypatch.setitem(checkpoints.SHIPPED_FOR_CURVE, ("radar", "cpu/float32/eager"), str(tmp_path / "radar-eager"))
    monkeypatch.setattr(learned_policies, "shipped_policies_misfit", lambda model, drafter: None)  # as if theirs
    method = METHODS["eagle3-radar"]()
    method.prepare(model, tokenizer, MethodOptions(max_new_tokens=12, eagle3_checkpoint=str(tmp_path / "drafter")))
    policy = method.generate_kwargs["assistant_policy"]
    assert isinstance(policy, RadarPolicy) and policy.tree.total_tokens == 4  # the variant, not the shipped default


def test_temperature_samples_with_top_k_and_top_p_off(bench_model):
    model, tokenizer = bench_model
    greedy, sampled = METHODS["stock"](), METHODS["stock"]()
    greedy.prepare(model, tokenizer, OPTIONS)
    sampled.prepare(model, tokenizer, dataclasses.replace(OPTIONS, temperature=1.5))
    assert greedy.generate_kwargs["do_sample"] is False and "temperature" not in greedy.generate_kwargs
    assert {k: sampled.generate_kwargs[k] for k in ("do_sample", "temperature", "top_k", "top_p")} == {
        "do_sample": True, "temperature": 1.5, "top_k": 0, "top_p": 1.0,
    }  # fmt: skip
    outputs = set()
    for seed in range(4):
        torch.manual_seed(seed)
        outputs.add(tuple(sampled.generate(prompt(tokenizer))[0]))
    assert len(outputs) > 1  # it samples


def test_eagle3_samples_through_the_engine(bench_model, tmp_path):
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    model, tokenizer = bench_model
    torch.manual_seed(0)
    Eagle3DraftModel.from_target(model).save_pretrained(tmp_path / "drafter")
    method = METHODS["eagle3"]()
    options = MethodOptions(max_new_tokens=12, tree_depth=3, tree_top_k=2, tree_total_tokens=6, temperature=1.0,
                            eagle3_checkpoint=str(tmp_path / "drafter"))
    method.prepare(model, tokenizer, options)
    tokens, stats = method.generate(prompt(tokenizer))
    assert 1 <= len(tokens) <= 12 and len(stats.accepted_lengths) >= 1
    assert model.last_speculation is not None


def test_negative_temperature_is_refused():
    from hf_adaptive_spec.bench.arguments import sampling_kwargs

    with pytest.raises(ValueError, match="--temperature must be 0 \\(greedy\\) or a finite positive number"):
        sampling_kwargs(-0.5)


def test_sized_suffix_decodes_each_call_in_a_cache_sized_for_it(bench_model):
    """``<method>+sized`` on the compiled path: the call's StaticCache fits its prompt, new tokens and largest bucket
    (as the engine sizes its own: 512 slots doubled), never longer than the run's; ``+lookup`` passes it to the
    method it wraps."""
    from hf_adaptive_spec.bench.fast_path import sized_cache_length

    model, tokenizer = bench_model
    assert [sized_cache_length(model, n, 128) for n in (1, 352, 353, 864, 865)] == [512, 512, 1024, 1024, 2048]
    options = dataclasses.replace(OPTIONS, compile=True, max_cache_len=1024)
    methods = build_methods(["plain-steps", "plain-steps+sized", "plain-steps+lookup+sized"])
    assert list(methods) == ["stock", "plain-steps", "plain-steps+sized", "plain-steps+lookup+sized"]
    for method in methods.values():
        method.prepare(model, tokenizer, options)
    ids, long_ids = prompt(tokenizer), torch.zeros((1, 1000), dtype=torch.long)  # needs 2,048 slots
    shared = methods["plain-steps"].call_kwargs(ids)["past_key_values"]
    sized = methods["plain-steps+sized"].call_kwargs(ids)["past_key_values"]
    assert shared.layers[0].max_cache_len == 1024 and sized.layers[0].max_cache_len == 512
    assert methods["plain-steps+sized"].call_kwargs(long_ids)["past_key_values"] is shared  # capped at the run's cache
    wrapped = methods["plain-steps+lookup+sized"].base
    assert (wrapped.call_kwargs(ids)["past_key_values"] is sized
            and "prompt_lookup_num_tokens" in wrapped.call_kwargs(ids))


def test_stock_compiled_sized_decodes_in_the_cache_the_engine_would_size(bench_model):
    """``stock-compiled+sized``: transformers' own fast path in the very cache ``<method>+sized`` decodes the same
    call in, so that the peer gains what a right-sized cache gives (with or without ``--compile``)."""
    model, tokenizer = bench_model
    methods = build_methods(["stock-compiled+sized", "plain-steps+sized"])
    for method in methods.values():
        method.prepare(model, tokenizer, dataclasses.replace(OPTIONS, compile=True, max_cache_len=1024))
    ids = prompt(tokenizer)
    stock_cache = methods["stock-compiled+sized"].call_kwargs(ids)["past_key_values"]
    assert stock_cache is methods["plain-steps+sized"].call_kwargs(ids)["past_key_values"]
    assert stock_cache.layers[0].max_cache_len == 512
    uncompiled = build_methods(["stock-compiled+sized"])["stock-compiled+sized"]
    uncompiled.prepare(model, tokenizer, dataclasses.replace(OPTIONS, max_cache_len=1024))
    assert uncompiled.call_kwargs(ids)["past_key_values"] is stock_cache


def cache_length(method, input_ids: torch.LongTensor) -> int | None:
    """Slots of the StaticCache ``method`` decodes ``input_ids`` in (None: generate's own cache)."""
    cache = method.call_kwargs(input_ids).get("past_key_values")
    return None if cache is None else cache.layers[0].max_cache_len


def test_warm_up_of_a_sized_method_compiles_every_cache_length_a_call_can_take(bench_model):
    """A ``+sized`` method's warm-up decodes in each size up to the run's cache (the prompt cut to fit), so no
    graph compiles inside a timed turn (stock reports no compile time to take out); then calls size themselves."""
    from hf_adaptive_spec.bench.fast_path import longest_prompt, sized_cache_lengths

    model, tokenizer = bench_model
    assert sized_cache_lengths(model, 128, 1408) == [512, 1024, 1408]
    assert (sized_cache_lengths(model, 128, 1024) == [512, 1024]
            and sized_cache_lengths(model, 500, 2048) == [1024, 2048])
    assert longest_prompt(model, 512, 128) == 352  # sized_cache_length(model, 352, 128) is 512, 353 needs 1024
    options = dataclasses.replace(OPTIONS, compile=True, max_cache_len=1408, max_new_tokens=128)
    methods = build_methods(["stock-compiled+sized", "plain-steps+lookup+sized", "plain-steps"])
    seen = []
    for name, method in methods.items():
        method.prepare(model, tokenizer, options)
        decoder = getattr(method, "base", method)  # +lookup decodes through the method it wraps
        decoder.generate = lambda ids, decoder=decoder, name=name: seen.append(
            (name, cache_length(decoder, ids), ids.shape[1])
        )
    long_prompt = torch.ones((1, 900), dtype=torch.long)
    for method in methods.values():
        assert [len(calls) for calls in method.warm_up(long_prompt, calls=2)] == [2] * len(method.warm_up_lengths())
    sized = [(512, 352), (512, 352), (1024, 864), (1024, 864), (1408, 900), (1408, 900)]
    assert seen[:2] == [("stock", None, 900)] * 2  # stock decodes in generate's own cache
    assert seen[2:] == (
        [("stock-compiled+sized", *call) for call in sized]
        + [("plain-steps+lookup+sized", *call) for call in sized]
        + [("plain-steps", 1408, 900)] * 2
    )
    seen.clear()
    short_prompt = torch.ones((1, 20), dtype=torch.long)  # the bench warms up on its first question, often short
    for name in ("stock-compiled+sized", "plain-steps+lookup+sized"):
        methods[name].warm_up(short_prompt, calls=1)
    assert seen == [
        (name, length, 20)
        for name in ("stock-compiled+sized", "plain-steps+lookup+sized")
        for length in (512, 1024, 1408)
    ]
    seen.clear()
    methods["stock-compiled+sized"].generate(short_prompt)
    assert seen == [("stock-compiled+sized", 512, 20)]  # after the warm-up, each call its own size again


def test_a_fast_path_cache_too_short_for_the_new_tokens_is_refused_with_the_minimum(bench_model):
    model, tokenizer = bench_model
    method = build_methods(["stock-compiled"])["stock-compiled"]
    with pytest.raises(ValueError, match=r"--max_cache_len 160 cannot hold a prompt, --max-new-tokens 128 .* >= 161"):
        method.prepare(model, tokenizer, dataclasses.replace(OPTIONS, max_cache_len=160, max_new_tokens=128))
    # one prompt token fits
    method.prepare(model, tokenizer, dataclasses.replace(OPTIONS, max_cache_len=161, max_new_tokens=128))


def test_sized_suffix_needs_the_compiled_path(bench_model):
    from hf_adaptive_spec.bench.errors import MethodUnavailableError

    model, tokenizer = bench_model
    with pytest.raises(MethodUnavailableError, match=r"plain-steps\+sized: \+sized sizes the StaticCache .* "
                       r"run it with --compile, on a tree method or stock-compiled"):
        build_methods(["plain-steps+sized"])["plain-steps+sized"].prepare(model, tokenizer, OPTIONS)
    with pytest.raises(UnknownMethodError, match=r"'ppow\+sized'.*then \+sized for a StaticCache sized per call"):
        build_methods(["ppow+sized"])


def test_the_lookup_branch_keeps_whether_its_method_learns_across_calls():
    """A resumed run names the methods whose learning restarted: eagle3-confidence+lookup was left out (found by a
    review), its policy's threshold restarting unreported."""
    options = OPTIONS
    for name in ("dvi", "eagle3-confidence", "eagle3-heuristic", "eagle3", "tree"):
        (plain,) = [m for n, m in build_methods([name]).items() if n == name]
        (branched,) = [m for n, m in build_methods([name + "+lookup"]).items() if n == name + "+lookup"]
        assert branched.learns_across_calls(options) == plain.learns_across_calls(options), name
    assert build_methods(["eagle3-heuristic+lookup"])["eagle3-heuristic+lookup"].learns_across_calls(options)
    # transformers restarts the confidence threshold every call (session 93): nothing carries over to report
    assert not build_methods(["eagle3-confidence+lookup"])["eagle3-confidence+lookup"].learns_across_calls(options)
