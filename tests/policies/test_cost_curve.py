"""A learned policy says which cost curve it was trained on; a call on another curve is reported."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.checkpoints import shipped_checkpoint
from hf_adaptive_spec.core import CostCurve, cost_curve_mismatch
from hf_adaptive_spec.core import cost_curve as cost_curve_module
from hf_adaptive_spec.core.cost_curve import bfloat16_conversion_hint, cpu_instruction_set
from hf_adaptive_spec.policies import LTDPolicy
from hf_adaptive_spec.profiling import HardwareProfile

SMALL = dict(depth=2, top_k=2, total_tokens=4, depth_actor=(8,), depth_critic=(8,), size_actor=(8,), size_critic=(8,))
EAGER_FP32 = {"device": "cpu", "dtype": "float32", "path": "eager"}


def test_cost_curves_are_normalised_and_compared(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0) if device.index == 1 else (8, 0))
    cuda = CostCurve.of(torch.device("cuda", 1), torch.bfloat16, "compiled")
    assert cuda == CostCurve("cuda", "bfloat16", "compiled", "sm_90") and str(cuda) == "cuda/bfloat16/compiled (sm_90)"
    cpu = CostCurve.of("cpu", "torch.float32", "eager")
    assert cpu == CostCurve("cpu", "float32", "eager", cpu_instruction_set()) and cpu.key == "cpu/float32/eager"
    with pytest.raises(ValueError, match="path must be one of"):
        CostCurve("cpu", "float32", "fast")
    running = CostCurve("cpu", "bfloat16", "compiled")
    assert cost_curve_mismatch("P", None, running) is None and cost_curve_mismatch("P", running, running) is None
    note = cost_curve_mismatch("P", CostCurve(**EAGER_FP32), running)
    assert "cpu/float32/eager" in note and "cpu/bfloat16/compiled" in note
    assert "hf-adaptive-spec profile --device cpu --dtype bfloat16 --compile" in note


def test_the_instruction_set_is_part_of_the_curve_when_both_sides_recorded_it():
    """A bfloat16 verification of 8 tokens costs 1.03x one token with AVX512-BF16 and 3.85x with AVX2 alone
    (results/fast_path/avx2/): a policy trained on one is reported on the other; a curve that did not record its
    instruction set (the shipped policies, profiles made before it was recorded) is compared without it."""
    trained = CostCurve("cpu", "bfloat16", "compiled", "AVX512-BF16")
    running = CostCurve("cpu", "bfloat16", "compiled", "AVX2")
    note = cost_curve_mismatch("P", trained, running)
    assert "cpu/bfloat16/compiled (AVX512-BF16) cost curve and this call runs on cpu/bfloat16/compiled (AVX2)" in note
    unrecorded = CostCurve("cpu", "bfloat16", "compiled")
    assert trained.fits(trained) and unrecorded.fits(running) and running.fits(unrecorded)
    assert cost_curve_mismatch("P", unrecorded, running) is None
    assert not CostCurve("cpu", "float32", "compiled", "AVX2").fits(running)  # the key still decides first


def test_a_malformed_trained_on_entry_names_the_fix():
    assert CostCurve.from_config(None) is None and CostCurve.from_config(EAGER_FP32) == CostCurve(**EAGER_FP32)
    recorded = {**EAGER_FP32, "instruction_set": "AVX2"}
    assert CostCurve.from_config(recorded) == CostCurve("cpu", "float32", "eager", "AVX2")
    for malformed in ({"device": "cpu"}, {**recorded, "threads": 2}):
        with pytest.raises(ValueError, match="trained_on must be a dict with device, dtype and path, and optionally "
                                             "instruction_set.*config.json"):
            LTDPolicy(**SMALL, trained_on=malformed)


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
    instruction_set = cpu_instruction_set()
    assert runs["dynamic"].cost_curve == f"cpu/float32/eager ({instruction_set})"
    assert runs["dynamic"].policy_cost_curve_mismatch is None  # trained_on records no instruction set: it fits
    assert runs["static"].cost_curve == f"cpu/float32/static ({instruction_set})"
    assert "trained on the cpu/float32/eager cost curve" in runs["static"].policy_cost_curve_mismatch
    untagged = model.generate(prompt(6), max_new_tokens=8, do_sample=False, assistant_model=drafter,
                              assistant_policy=hfas.StaticTreePolicy.chain(2), cache_implementation="static",
                              return_dict_in_generate=True)
    assert untagged.speculation.policy_cost_curve_mismatch is None  # a static tree assumes no costs


def test_trained_on_is_saved_and_set_from_the_training_profile(tmp_path):
    policy = LTDPolicy(**SMALL)
    assert policy.trained_on is None
    profile = HardwareProfile(device="cpu", dtype="bfloat16", num_threads=2, context_length=8, verify_tokens=[1],
                              verify_seconds=[0.01], path="compiled", instruction_set="AMX")
    policy.mark_trained_on(profile.cost_curve())
    policy.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["trained_on"] == {
        "device": "cpu", "dtype": "bfloat16", "path": "compiled", "instruction_set": "AMX"}
    assert LTDPolicy.from_pretrained(tmp_path).trained_on == CostCurve("cpu", "bfloat16", "compiled", "AMX")


@pytest.mark.parametrize("method", ["ltd", "radar", "resps"])
def test_shipped_policies_say_they_were_trained_on_the_eager_float32_curve(method):
    config = json.loads((hfas.shipped_checkpoint(method) / "config.json").read_text())
    assert config["trained_on"] == {**EAGER_FP32, "instruction_set": "AVX2"}  # an AVX2-only EPYC's eager curve


def test_each_policy_shipped_for_a_curve_was_trained_on_it():
    from hf_adaptive_spec import checkpoints

    for (name, curve), folder in checkpoints.SHIPPED_FOR_CURVE.items():
        config = json.loads((hfas.shipped_checkpoint(name, curve) / "config.json").read_text())
        assert CostCurve.from_config(config["trained_on"]).key == curve, folder


def test_a_policy_shipped_for_a_curve_is_the_one_that_curve_gets(tmp_path, monkeypatch):
    """``shipped_checkpoint(name, curve)`` picks the variant retrained for ``curve`` (the profile's replay and
    recommendation and the bench's learned-policy methods ask for it); other curves keep the default one."""
    from hf_adaptive_spec import checkpoints
    from hf_adaptive_spec.profiling.ranking import shipped_policy_fit

    compiled = CostCurve("cpu", "bfloat16", "compiled")
    policy = LTDPolicy(**SMALL)
    policy.mark_trained_on(compiled)
    policy.save_pretrained(tmp_path / "ltd-compiled")
    monkeypatch.setattr(checkpoints, "SHIPPED_FOR_CURVE", {("ltd", compiled.key): str(tmp_path / "ltd-compiled")})
    default = hfas.shipped_checkpoint("ltd")
    assert hfas.shipped_checkpoint("ltd", compiled) == tmp_path / "ltd-compiled"
    assert hfas.shipped_checkpoint("ltd", CostCurve("cpu", "bfloat16", "compiled", "AVX2")) == tmp_path / "ltd-compiled"
    assert hfas.shipped_checkpoint("ltd", "cpu/bfloat16/compiled") == tmp_path / "ltd-compiled"
    assert hfas.shipped_checkpoint("ltd", CostCurve(**EAGER_FP32)) == default
    assert hfas.shipped_checkpoint("radar", compiled) == hfas.shipped_checkpoint("radar")  # no variant for it here
    fit = dict(line.split(" policy: ", 1) for line in shipped_policy_fit(compiled))
    assert fit["shipped ltd"] == "trained on cpu/bfloat16/compiled; fits this curve"
    assert "trained on another curve" in fit["shipped radar"]


def test_a_curve_written_as_text_is_read_back_and_other_text_is_refused():
    """shipped_checkpoint('ltd', str(out.speculation.cost_curve)) gave the eager float32 default, as did a typo."""
    curve = CostCurve("cpu", "bfloat16", "compiled", "AVX512-BF16")
    assert CostCurve.parse(str(curve)) == curve and CostCurve.parse(curve.key) == CostCurve("cpu", "bfloat16",
                                                                                            "compiled")
    assert CostCurve.parse("cpu/float/eager") == CostCurve("cpu", "float32", "eager")
    compiled_ltd = shipped_checkpoint("ltd", curve)
    assert shipped_checkpoint("ltd", str(curve)) == shipped_checkpoint("ltd", curve.key) == compiled_ltd
    assert compiled_ltd != shipped_checkpoint("ltd")
    for typo in ("cpu/bf16/compiled", "cpu/bfloat16", "cpu/bfloat16/compiled (AVX", "bfloat16",
                 "cpux/bfloat16/compiled", "cuda:0/bfloat16/compiled"):
        with pytest.raises(ValueError, match="is not a cost curve: write device/dtype/path"):
            shipped_checkpoint("ltd", typo)
    with pytest.raises(ValueError, match="path must be one of"):
        shipped_checkpoint("ltd", "cpu/bfloat16/jit")


@pytest.mark.parametrize(
    ("curve", "hinted"),
    [(CostCurve("cpu", "bfloat16", "compiled", "AVX512"), True), (CostCurve("cpu", "bfloat16", "eager", "AVX2"), True),
     (CostCurve("cpu", "bfloat16", "compiled", "AMX"), False),
     (CostCurve("cpu", "bfloat16", "compiled", "AVX512-BF16"), False),
     (CostCurve("cpu", "float32", "compiled", "AVX512"), False), (CostCurve("cpu", "bfloat16", "eager", None), False),
     (CostCurve("cuda", "bfloat16", "compiled", "sm_90"), False)],
)
def test_the_float32_hint_is_for_bfloat16_on_a_cpu_that_converts_it(curve, hinted):
    hint = bfloat16_conversion_hint(curve)
    assert (hint is not None) == hinted
    if hinted:
        assert f"This CPU ({curve.instruction_set}) has no bfloat16 matrix instructions" in hint
        assert "Load the model in float32" in hint and "prompt_lookup_num_tokens=4" in hint


@pytest.mark.parametrize(("instruction_set", "dtype", "hinted"),
                         [("AVX512", torch.bfloat16, True), ("AMX", torch.bfloat16, False),
                          ("AVX2", torch.float32, False)])
def test_the_engine_hints_float32_once_where_bfloat16_is_converted(monkeypatch, caplog, instruction_set, dtype,
                                                                   hinted):
    """A bfloat16 call on a CPU without bfloat16 matrix instructions is told, once, that the float32 engine was
    measured faster on such CPUs (2.05x compiled bfloat16 stock against 1.24x for the bfloat16 engine on an
    AVX-512 Xeon); the tokens are the engine's as ever."""
    import logging

    monkeypatch.setattr(cost_curve_module, "cpu_instruction_set", lambda: instruction_set)
    model = tiny_model("llama").to(dtype)
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    logging.Logger.warning_once.cache_clear()  # transformers warns once per process
    with caplog.at_level("WARNING"):
        for _ in range(2):
            out = model.generate(prompt(6), max_new_tokens=8, do_sample=False, assistant_model=drafter,
                                 assistant_policy=hfas.StaticTreePolicy.chain(2), return_dict_in_generate=True)
    assert out.speculation.cost_curve == f"cpu/{str(dtype).removeprefix('torch.')}/eager ({instruction_set})"
    assert caplog.text.count("has no bfloat16 matrix instructions") == (1 if hinted else 0)
