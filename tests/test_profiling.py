"""The hardware profile: measurement plumbing and the interpolation the cost models use."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt

import hf_adaptive_spec as hfas
from hf_adaptive_spec.profiling import HardwareProfile, measure_in_generate, measure_verification


def test_profile_interpolates_and_round_trips(tmp_path):
    profile = HardwareProfile("cpu", "float32", 1, 64, verify_tokens=[1, 4, 8], verify_seconds=[0.01, 0.02, 0.04])
    assert profile.verify_time(1) == 0.01 and profile.verify_time(6) == pytest.approx(0.03)
    assert profile.verify_time(0) == 0.01 and profile.verify_time(100) == 0.04
    profile.save(tmp_path / "p.json")
    assert HardwareProfile.load(tmp_path / "p.json") == profile


def test_a_static_path_profile_charges_the_bucket_a_tree_is_padded_to(tmp_path):
    """On the static-cache path a tree of n nodes runs at its bucket's size (a step function), and
    trees never exceed the largest bucket; a profile without a bucket's own time is refused."""
    profile = HardwareProfile("cpu", "bfloat16", 2, 256, verify_tokens=[1, 8, 12, 16, 24, 32],
                              verify_seconds=[0.026, 0.026, 0.032, 0.043, 0.039, 0.046], path="compiled",
                              buckets=[8, 12, 16, 32])
    assert profile.verify_time(1) == 0.026 and profile.verify_time(9) == 0.032 and profile.verify_time(13) == 0.043
    assert profile.verify_time(17) == 0.046 and profile.verify_time(24) == 0.046 and profile.verify_time(64) == 0.046
    profile.save(tmp_path / "p.json")
    assert HardwareProfile.load(tmp_path / "p.json") == profile
    with pytest.raises(ValueError, match=r"must measure each of them; \[12\] not measured"):
        HardwareProfile("cpu", "bfloat16", 2, 256, verify_tokens=[1, 8, 16], verify_seconds=[1, 1, 1], buckets=[8, 12, 16])


def test_draft_levels_count_the_drafter_steps_before_pruning(llama):
    """The profile's seconds per draft level divide by the levels drafted (what replay charges), not
    by the pruned tree's depth: a depth-3 tree pruned to 3 candidates often keeps only 2 levels."""
    out = llama.generate(
        prompt(6), max_new_tokens=12, do_sample=False, assistant_model=hfas.CausalLMDrafter.from_target_layers(llama, 2),
        assistant_policy=hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=4), return_dict_in_generate=True,
    )
    stats = out.speculation
    assert stats.draft_levels[0] == 3
    assert all(levels >= depth for levels, depth in zip(stats.draft_levels, stats.draft_depths))
    assert any(levels > depth for levels, depth in zip(stats.draft_levels, stats.draft_depths))


def test_no_level_is_drafted_below_what_the_verified_tree_can_hold(llama):
    """A tree of total_tokens nodes (root included) is at most total_tokens - 1 deep, so deeper
    levels are never drafted (e.g. the +2/-1 schedule's long chains capped to a static bucket);
    the tokens stay stock's."""
    ids = prompt(6)
    expected = llama.generate(ids, max_new_tokens=16, do_sample=False)
    out = llama.generate(
        ids, max_new_tokens=16, do_sample=False, assistant_model=hfas.CausalLMDrafter.from_target_layers(llama, 2),
        assistant_policy=hfas.StaticTreePolicy(depth=6, top_k=1, total_tokens=3), return_dict_in_generate=True,
    )
    assert torch.equal(out.sequences, expected)
    assert max(out.speculation.draft_levels) == 2


def test_measurements_on_a_tiny_model(llama):
    tokens, seconds = measure_verification(llama, context_length=16, tokens=(1, 8), repeats=2)
    assert tokens == [1, 8] and all(s > 0 for s in seconds)
    draft, policy = measure_in_generate(
        llama, prompt(6), hfas.CausalLMDrafter.from_target_layers(llama, 2), hfas.StaticTreePolicy.chain(3), max_new_tokens=12
    )
    assert draft > 0 and policy >= 0


def test_profile_cli_measures_a_model_of_ones_own(tmp_path):
    """``hf-adaptive-spec profile --model FOLDER``: any causal LM, not only the embedded default."""
    from tiny_models import make_char_tokenizer, tiny_model

    from hf_adaptive_spec.core import CostCurve
    from hf_adaptive_spec.profiling import cli

    folder = tmp_path / "model"
    tiny_model("llama").save_pretrained(folder)
    tokenizer = make_char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'][:20] }}{% endfor %}"
    tokenizer.save_pretrained(folder)
    out = tmp_path / "profile.json"
    argv = ["--model", str(folder), "--json", str(out), "--verify-tokens", "1,4", "--repeats", "1",
            "--context-length", "16", "--drafter-layers", "2"]
    assert cli.main(argv) == 0
    profile = HardwareProfile.load(out)
    assert profile.verify_tokens == [1, 4] and profile.draft_step_seconds > 0
    assert profile.cost_curve() == CostCurve("cpu", "float32", "eager") and profile.buckets is None
    assert cli.main([*argv, "--static"]) == 0  # the static path measures (at least) the engine's buckets
    profile = HardwareProfile.load(out)
    assert profile.buckets == [8, 12, 16, 32] and profile.verify_tokens == [1, 4, 8, 12, 16, 32]
    assert profile.cost_curve() == CostCurve("cpu", "float32", "static")


def test_profile_says_which_shipped_policies_fit_its_curve():
    from hf_adaptive_spec.core import CostCurve
    from hf_adaptive_spec.profiling.cli import shipped_policy_fit

    assert all("fits this curve" in line for line in shipped_policy_fit(CostCurve("cpu", "float32", "eager")))
    compiled = shipped_policy_fit(CostCurve("cpu", "bfloat16", "compiled"))
    assert len(compiled) == 3 and all("trained on cpu/float32/eager; trained on another curve" in line for line in compiled)
