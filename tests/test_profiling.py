"""The hardware profile: measurement plumbing and the interpolation the cost models use."""

from __future__ import annotations

import pytest
from tiny_models import prompt

import hf_adaptive_spec as hfas
from hf_adaptive_spec.profiling import HardwareProfile, measure_in_generate, measure_verification


def test_profile_interpolates_and_round_trips(tmp_path):
    profile = HardwareProfile("cpu", "float32", 1, 64, verify_tokens=[1, 4, 8], verify_seconds=[0.01, 0.02, 0.04])
    assert profile.verify_time(1) == 0.01 and profile.verify_time(6) == pytest.approx(0.03)
    assert profile.verify_time(0) == 0.01 and profile.verify_time(100) == 0.04
    profile.save(tmp_path / "p.json")
    assert HardwareProfile.load(tmp_path / "p.json") == profile


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
    assert profile.cost_curve() == CostCurve("cpu", "float32", "eager")


def test_profile_says_which_shipped_policies_fit_its_curve():
    from hf_adaptive_spec.core import CostCurve
    from hf_adaptive_spec.profiling.cli import shipped_policy_fit

    assert all("fits this curve" in line for line in shipped_policy_fit(CostCurve("cpu", "float32", "eager")))
    compiled = shipped_policy_fit(CostCurve("cpu", "bfloat16", "compiled"))
    assert len(compiled) == 3 and all("trained on cpu/float32/eager; trained on another curve" in line for line in compiled)
