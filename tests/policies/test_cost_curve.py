"""A learned policy says which cost curve it was trained on; a call on another curve is reported."""

from __future__ import annotations

import json

import pytest
import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core import CostCurve, cost_curve_mismatch
from hf_adaptive_spec.policies import LTDPolicy
from hf_adaptive_spec.profiling import HardwareProfile
from tiny_models import prompt, tiny_model

SMALL = dict(depth=2, top_k=2, total_tokens=4, depth_actor=(8,), depth_critic=(8,), size_actor=(8,), size_critic=(8,))
EAGER_FP32 = {"device": "cpu", "dtype": "float32", "path": "eager"}


def test_cost_curves_are_normalised_and_compared():
    assert CostCurve.of(torch.device("cuda", 1), torch.bfloat16, "compiled") == CostCurve("cuda", "bfloat16", "compiled")
    assert str(CostCurve.of("cpu", "torch.float32", "eager")) == "cpu/float32/eager"
    with pytest.raises(ValueError, match="path must be one of"):
        CostCurve("cpu", "float32", "fast")
    running = CostCurve("cpu", "bfloat16", "compiled")
    assert cost_curve_mismatch("P", None, running) is None and cost_curve_mismatch("P", running, running) is None
    note = cost_curve_mismatch("P", CostCurve(**EAGER_FP32), running)
    assert "cpu/float32/eager" in note and "cpu/bfloat16/compiled" in note
    assert "hf-adaptive-spec profile --dtype bfloat16 --compile" in note


def test_a_malformed_trained_on_entry_names_the_fix():
    assert CostCurve.from_config(None) is None and CostCurve.from_config(EAGER_FP32) == CostCurve(**EAGER_FP32)
    with pytest.raises(ValueError, match="trained_on must be a dict with exactly device, dtype and path.*config.json"):
        LTDPolicy(**SMALL, trained_on={"device": "cpu"})


def test_the_engine_reports_a_policy_trained_on_another_curve():
    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    policy = LTDPolicy(trained_on=EAGER_FP32, **SMALL)
    runs = {}
    for cache in ("dynamic", "static"):
        extra = {"cache_implementation": "static"} if cache == "static" else {}
        out = model.generate(prompt(6), max_new_tokens=8, do_sample=False, assistant_model=drafter,
                             assistant_policy=policy, return_dict_in_generate=True, **extra)
        runs[cache] = out.speculation
    assert runs["dynamic"].cost_curve == "cpu/float32/eager" and runs["dynamic"].policy_cost_curve_mismatch is None
    assert runs["static"].cost_curve == "cpu/float32/static"
    assert "trained on the cpu/float32/eager cost curve" in runs["static"].policy_cost_curve_mismatch
    untagged = model.generate(prompt(6), max_new_tokens=8, do_sample=False, assistant_model=drafter,
                              assistant_policy=hfas.StaticTreePolicy.chain(2), cache_implementation="static",
                              return_dict_in_generate=True)
    assert untagged.speculation.policy_cost_curve_mismatch is None  # a static tree assumes no costs


def test_trained_on_is_saved_and_set_from_the_training_profile(tmp_path):
    policy = LTDPolicy(**SMALL)
    assert policy.trained_on is None
    profile = HardwareProfile(device="cpu", dtype="bfloat16", num_threads=2, context_length=8, verify_tokens=[1],
                              verify_seconds=[0.01], path="compiled")
    policy.mark_trained_on(profile.cost_curve())
    policy.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["trained_on"] == {
        "device": "cpu", "dtype": "bfloat16", "path": "compiled"}
    assert LTDPolicy.from_pretrained(tmp_path).trained_on == CostCurve("cpu", "bfloat16", "compiled")


@pytest.mark.parametrize("method", ["ltd", "radar", "resps"])
def test_shipped_policies_say_they_were_trained_on_the_eager_float32_curve(method):
    config = json.loads((hfas.shipped_checkpoint(method) / "config.json").read_text())
    assert config["trained_on"] == EAGER_FP32


def test_each_policy_shipped_for_a_curve_was_trained_on_it():
    from hf_adaptive_spec import checkpoints

    for (name, curve), folder in checkpoints.SHIPPED_FOR_CURVE.items():
        config = json.loads((hfas.shipped_checkpoint(name, curve) / "config.json").read_text())
        assert str(CostCurve.from_config(config["trained_on"])) == curve, folder


def test_a_policy_shipped_for_a_curve_is_the_one_that_curve_gets(tmp_path, monkeypatch):
    """``shipped_checkpoint(name, curve)`` picks the variant retrained for ``curve`` (the profile's replay and
    recommendation and the bench's learned-policy methods ask for it); other curves keep the default one."""
    from hf_adaptive_spec import checkpoints
    from hf_adaptive_spec.profiling.cli import shipped_policy_fit

    compiled = CostCurve("cpu", "bfloat16", "compiled")
    policy = LTDPolicy(**SMALL)
    policy.mark_trained_on(compiled)
    policy.save_pretrained(tmp_path / "ltd-compiled")
    monkeypatch.setattr(checkpoints, "SHIPPED_FOR_CURVE", {("ltd", str(compiled)): str(tmp_path / "ltd-compiled")})
    default = hfas.shipped_checkpoint("ltd")
    assert hfas.shipped_checkpoint("ltd", compiled) == tmp_path / "ltd-compiled"
    assert hfas.shipped_checkpoint("ltd", "cpu/bfloat16/compiled") == tmp_path / "ltd-compiled"
    assert hfas.shipped_checkpoint("ltd", CostCurve(**EAGER_FP32)) == default
    assert hfas.shipped_checkpoint("radar", compiled) == hfas.shipped_checkpoint("radar")  # no variant for it here
    fit = dict(line.split(" policy: ", 1) for line in shipped_policy_fit(compiled))
    assert fit["shipped ltd"] == "trained on cpu/bfloat16/compiled; fits this curve"
    assert "trained on another curve" in fit["shipped radar"]
