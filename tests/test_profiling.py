"""The hardware profile: measurement plumbing and the interpolation the cost models use."""

from __future__ import annotations

import argparse
import json
import re

import pytest
import torch
from tiny_models import prompt, tiny_model
from transformers import AutoModelForCausalLM

import hf_adaptive_spec as hfas
from hf_adaptive_spec import default_model
from hf_adaptive_spec.checkpoints import shipped_checkpoint
from hf_adaptive_spec.profiling import HardwareProfile, measure_in_generate, measure_verification, recommended_tree


def test_profile_interpolates_and_round_trips(tmp_path):
    profile = HardwareProfile("cpu", "float32", 1, 64, verify_tokens=[1, 4, 8], verify_seconds=[0.01, 0.02, 0.04])
    assert profile.verify_time(1) == 0.01 and profile.verify_time(6) == pytest.approx(0.03)
    assert profile.verify_time(0) == 0.01 and profile.verify_time(12) == pytest.approx(0.06)  # the last segment goes on
    profile.save(tmp_path / "p.json")
    assert HardwareProfile.load(tmp_path / "p.json") == profile
    given_unsorted = HardwareProfile("cpu", "float32", 1, 64, verify_tokens=[8, 1, 4],
                                     verify_seconds=[0.04, 0.01, 0.02])
    assert given_unsorted == profile and given_unsorted.verify_time(6) == pytest.approx(0.03)  # `--verify-tokens 8,1,4`
    with pytest.raises(ValueError, match="measures a size twice"):
        HardwareProfile("cpu", "float32", 1, 64, verify_tokens=[1, 4, 4], verify_seconds=[0.01, 0.02, 0.03])


def test_a_profile_save_cut_by_a_crash_leaves_the_profile_before_it(tmp_path, crash_mid_write):
    """Measuring again over a saved profile, a crash while it was written lost the profile and left half a JSON file
    (which loads as an error)."""
    profile = HardwareProfile("cpu", "float32", 1, 64, verify_tokens=[1, 4], verify_seconds=[0.01, 0.02])
    profile.save(tmp_path / "p.json")
    with crash_mid_write():
        HardwareProfile("cpu", "float32", 1, 64, verify_tokens=[1, 4], verify_seconds=[0.02, 0.03]).save(
            tmp_path / "p.json"
        )
    assert HardwareProfile.load(tmp_path / "p.json") == profile and [p.name for p in tmp_path.iterdir()] == ["p.json"]


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
        HardwareProfile("cpu", "bfloat16", 2, 256, verify_tokens=[1, 8, 16], verify_seconds=[1, 1, 1],
                        path="compiled", buckets=[8, 12, 16])


def test_buckets_measured_inside_generate_are_what_a_tree_costs(tmp_path):
    """With ``bucket_seconds`` (each bucket as ``generate`` runs it) a tree costs its bucket's measured cycle,
    not the bare forward; a time per bucket is required, in the buckets' order."""
    forwards = dict(verify_tokens=[1, 8, 12, 16, 32], verify_seconds=[0.026, 0.026, 0.032, 0.040, 0.060])
    profile = HardwareProfile("cpu", "bfloat16", 2, 512, **forwards, path="compiled", buckets=[8, 12, 16, 32],
                              bucket_seconds=[0.031, 0.035, 0.045, 0.068])
    assert [profile.verify_time(n) for n in (1, 8, 9, 13, 16, 17, 64)] == [
        0.031, 0.031, 0.035, 0.045, 0.045, 0.068, 0.068
    ]
    profile.save(tmp_path / "p.json")
    assert HardwareProfile.load(tmp_path / "p.json") == profile
    with pytest.raises(ValueError, match=r"3 times for buckets \[8, 12, 16, 32\]: give one time per bucket"):
        HardwareProfile("cpu", "bfloat16", 2, 512, **forwards, path="compiled", buckets=[8, 12, 16, 32],
                        bucket_seconds=[0.03, 0.03, 0.04])
    with pytest.raises(ValueError, match="follow the buckets' order: give the buckets sorted"):
        HardwareProfile("cpu", "bfloat16", 2, 512, **forwards, path="compiled", buckets=[12, 8, 16, 32],
                        bucket_seconds=[1, 2, 3, 4])


def test_a_drafting_cycle_pays_for_the_committed_tokens_its_first_step_reads(tmp_path):
    """With a catch-up table the first draft level costs what reading the unread committed tokens costs
    (interpolated, past the last point along the last segment) and every later level a draft step; without
    one (older profiles) every level costs a draft step; a cycle that drafts nothing costs nothing."""
    curve = dict(verify_tokens=[1, 8], verify_seconds=[0.04, 0.05], draft_step_seconds=0.005)
    profile = HardwareProfile("cpu", "bfloat16", 2, 256, **curve, catch_up_tokens=[2.0, 6.0, 12.0],
                              catch_up_seconds=[0.0056, 0.0077, 0.0125])
    assert profile.draft_time(0, 40) == 0.0
    assert profile.draft_time(1, 1) == 0.0056 and profile.draft_time(1, 6) == 0.0077
    assert profile.draft_time(3, 9) == pytest.approx(0.0101 + 2 * 0.005)
    assert profile.draft_time(1, 24) == pytest.approx(0.0125 + 12 * 0.0008)  # the last segment goes on
    profile.save(tmp_path / "p.json")
    assert HardwareProfile.load(tmp_path / "p.json") == profile
    older = HardwareProfile("cpu", "bfloat16", 2, 256, **curve)
    assert older.draft_time(3, 40) == pytest.approx(3 * 0.005)
    for tokens, seconds in (([2.0, 6.0], [0.005]), ([6.0, 2.0], [0.005, 0.006]), ([], []), ([2.0], None)):
        with pytest.raises(ValueError, match="need one time per token count"):
            HardwareProfile("cpu", "bfloat16", 2, 256, **curve, catch_up_tokens=tokens, catch_up_seconds=seconds)


def test_a_long_prompts_first_draft_step_never_costs_less_than_a_shorter_ones(tmp_path):
    """A catch-up table whose last median dips (noise) is made non-decreasing, as measured and at load for older
    profiles, so that no extrapolation past its last count falls below 0 s; a falling verification segment is not
    extrapolated either; times no measurement gives are refused, naming the field."""
    from hf_adaptive_spec.profiling.measure import catch_up_points

    assert catch_up_points([1, 6, 40], [2.0, 9.0, 5.0], (4, 8, 16, 32, 64)) == ([1, 6, 40], [2.0, 7.0, 7.0])
    curve = dict(verify_tokens=[1, 8], verify_seconds=[0.04, 0.05], draft_step_seconds=0.005)
    (tmp_path / "old.json").write_text(json.dumps({
        "device": "cpu", "dtype": "float32", "num_threads": 2, "context_length": 16, **curve,
        "catch_up_tokens": [2.0, 10.0, 19.0], "catch_up_seconds": [0.004, 0.012, 0.006]}))
    old = HardwareProfile.load(tmp_path / "old.json")
    assert old.catch_up_seconds == pytest.approx([0.004, 0.009, 0.009])
    assert [old.draft_time(1, n) for n in (19, 200, 5000)] == pytest.approx([0.009] * 3)
    falling = HardwareProfile("cpu", "float32", 1, 64, verify_tokens=[1, 4, 8], verify_seconds=[0.01, 0.03, 0.02])
    assert falling.verify_time(64) == 0.02  # the last measured size's time, not 0.02 - 56 * 0.0025
    for field_name, value in (("verify_seconds", [0.04, -0.05]), ("verify_seconds", [0.04, float("nan")]),
                              ("catch_up_seconds", [0.0, 0.01]), ("draft_step_seconds", -0.001),
                              ("policy_call_seconds", float("inf"))):
        fields = {**curve, "catch_up_tokens": [2.0, 6.0], "catch_up_seconds": [0.004, 0.006], field_name: value}
        with pytest.raises(ValueError, match=f"{field_name} .*measure it again"):
            HardwareProfile("cpu", "float32", 2, 16, **fields)


def test_the_catch_up_table_is_measured_inside_generate_from_cycles_that_draft_every_kth_time(llama):
    """Drafting one level every k-th cycle makes the drafting cycles read about k cycles' tokens; the first reads
    the prompt, the largest point. Points are grouped by the drafter's step buckets, ascending."""
    from hf_adaptive_spec.profiling.measure import _DraftEveryKthCycle, catch_up_points, measure_catch_up_in_generate

    ids = prompt(40)
    out = llama.generate(ids, max_new_tokens=12, do_sample=False,
                         assistant_model=hfas.CausalLMDrafter.from_target_layers(llama, 2),
                         assistant_policy=_DraftEveryKthCycle(3), return_dict_in_generate=True)
    stats = out.speculation
    assert stats.draft_levels[:6] == [1, 0, 0, 1, 0, 0] and len(stats.draft_times) == stats.cycles
    assert sum(stats.draft_times) == pytest.approx(stats.draft_time) and stats.draft_times[1] < stats.draft_times[0]
    tokens, seconds = measure_catch_up_in_generate(
        llama, ids, hfas.CausalLMDrafter.from_target_layers(llama, 2), intervals=(1, 4), max_new_tokens=16
    )
    assert tokens == sorted(tokens) and len(tokens) == len(seconds) >= 2 and all(s > 0 for s in seconds)
    assert tokens[-1] == 40 and tokens[0] <= 4  # the prompt alone in its group; single cycles' tokens in the first
    assert (catch_up_points([1, 3, 6, 40, 2], [1.0, 3.0, 5.0, 9.0, 2.0], (4, 8, 16, 32, 64))
            == ([2, 6, 40], [2.0, 5.0, 9.0]))


@pytest.mark.parametrize("bucket", [8, 12, 16, 32])
def test_the_bucket_filling_tree_verifies_its_bucket_every_full_cycle(llama, bucket):
    from hf_adaptive_spec.profiling.measure import bucket_filling_tree

    out = llama.generate(
        prompt(6), max_new_tokens=24, do_sample=False,
        assistant_model=hfas.CausalLMDrafter.from_target_layers(llama, 2),
        assistant_policy=bucket_filling_tree(bucket), return_dict_in_generate=True,
    )
    assert set(out.speculation.verified_tokens[:-2]) == {bucket}  # the last cycles may be cut by max_new_tokens


def test_bucket_measurements_refuse_what_they_cannot_time(llama):
    from hf_adaptive_spec.profiling.measure import (
        bucket_filling_tree,
        measure_buckets_in_generate,
        measure_static_verification,
    )

    drafter = hfas.CausalLMDrafter.from_target_layers(llama, 2)
    with pytest.raises(ValueError, match=r"Buckets \[10\] are not the engine's \(\[8, 12, 16, 32\]\)"):
        measure_buckets_in_generate(llama, prompt(6), drafter, [8, 10], cache_length=512)
    with pytest.raises(ValueError, match="cannot hold a 6-token prompt, 18 new tokens and a 32-token verification"):
        measure_buckets_in_generate(llama, prompt(6), drafter, [8], cache_length=48)
    with pytest.raises(ValueError, match="give a bucket >= 2 and top_k >= 1"):
        bucket_filling_tree(8, top_k=0)
    with pytest.raises(ValueError,
                       match="cannot hold 16 context tokens and a verification of 8: pass cache_slots >= 25"):
        measure_static_verification(llama, context_length=16, tokens=(1, 8), cache_slots=20)


def test_sliding_window_models_are_timed_in_full_length_static_layers():
    """The static path keeps sliding layers full-length: a ring buffer would roll the tree's slots (silently wrong
    times) and generate refuses one."""
    from hf_adaptive_spec.profiling.measure import measure_buckets_in_generate, measure_static_verification

    model = tiny_model("qwen2-hybrid")  # sliding window 5 in its first layers, full attention after
    tokens, seconds, _ = measure_static_verification(model, context_length=16, tokens=(1, 8), repeats=1)
    assert tokens == [1, 8] and all(s > 0 for s in seconds)
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    assert len(measure_buckets_in_generate(model, prompt(6), drafter, [8], cache_length=512, rounds=1,
                                           cycles_per_size=2)) == 1


def test_profiles_written_before_the_bucket_fields_load(tmp_path):
    import json

    old = {"device": "cpu", "dtype": "bfloat16", "num_threads": 2, "context_length": 512, "verify_tokens": [1, 8],
           "verify_seconds": [0.04, 0.03], "path": "compiled", "buckets": [8]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    profile = HardwareProfile.load(tmp_path / "old.json")
    assert profile.bucket_seconds is None and profile.cache_slots is None and profile.verify_time(5) == 0.03
    assert profile.instruction_set is None


def test_draft_levels_count_the_drafter_steps_before_pruning(llama):
    """The profile's seconds per draft level divide by the levels drafted (what replay charges), not
    by the pruned tree's depth: a depth-3 tree pruned to 3 candidates often keeps only 2 levels."""
    out = llama.generate(
        prompt(6), max_new_tokens=12, do_sample=False,
        assistant_model=hfas.CausalLMDrafter.from_target_layers(llama, 2),
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
        llama, prompt(6), hfas.CausalLMDrafter.from_target_layers(llama, 2), hfas.StaticTreePolicy.chain(3),
        max_new_tokens=12,
    )
    assert draft > 0 and policy >= 0


def test_a_later_draft_level_is_timed_apart_from_the_first():
    """``draft_step_seconds`` is what ``HardwareProfile.draft_time`` charges each level after the first: the deep
    cycles' drafting less the one-level cycles', per level between. A mean over every level would count the first
    level's cheaper step in (here 12.5 ms against the 15 ms a later level costs)."""
    from hf_adaptive_spec.profiling.measure import later_level_seconds

    levels, seconds = [3, 1, 3, 1, 3, 1], [0.040, 0.010, 0.041, 0.011, 0.039, 0.010]
    assert later_level_seconds(levels, seconds) == pytest.approx(0.015)
    assert later_level_seconds([2, 1], [0.005, 0.009]) == 0.0  # noise, not a negative cost
    with pytest.raises(ValueError, match="generate more tokens"):
        later_level_seconds([3, 3], [0.040, 0.041])
    with pytest.raises(ValueError, match="cycles of one level and of more"):
        later_level_seconds([1, 1], [0.010, 0.011])


@pytest.mark.parametrize(("supported", "expected"), [
    ({"avx2"}, "AVX2"), ({"avx2", "avx512"}, "AVX512"), ({"avx2", "avx512", "avx512_bf16"}, "AVX512-BF16"),
    ({"avx2", "avx512", "avx512_bf16", "amx_tile"}, "AMX"),
])
def test_the_cpu_instruction_set_is_the_best_one_torch_reports(monkeypatch, supported, expected):
    from hf_adaptive_spec.core.cost_curve import cpu_instruction_set

    for name in ("avx2", "avx512", "avx512_bf16", "amx_tile"):
        monkeypatch.setattr(torch.cpu, f"_is_{name}_supported", lambda name=name: name in supported)
    assert cpu_instruction_set() == expected


@pytest.mark.parametrize(("dtype", "instruction_set", "warned"), [
    ("bfloat16", "AVX2", True), ("bfloat16", "AVX512", True), ("bfloat16", "AMX", False),
    ("bfloat16", "AVX512-BF16", False), ("float32", "AVX2", False),
])
def test_the_profile_says_when_bfloat16_has_no_matrix_instructions(dtype, instruction_set, warned):
    """Measured on a 2-core AVX2-only EPYC: 8 tokens cost 3.85x one token in bfloat16, compiled (1.03x on the machine
    of the results): the profile names the instruction set and, in bfloat16 without AMX or AVX512-BF16, says why."""
    from hf_adaptive_spec.core.cost_curve import converts_bfloat16
    from hf_adaptive_spec.profiling.cli import instruction_set_lines

    assert converts_bfloat16(dtype, instruction_set) == warned  # the quickstart's note asks the same
    profile = HardwareProfile(device="cpu", dtype=dtype, num_threads=2, context_length=16, verify_tokens=[1],
                              verify_seconds=[0.01], instruction_set=instruction_set)
    lines = instruction_set_lines(profile)
    assert lines[0] == f"instruction set: {instruction_set}"
    assert any("no bfloat16 matrix instructions" in line for line in lines) == warned
    timed = HardwareProfile(device="cpu", dtype=dtype, num_threads=2, context_length=16, verify_tokens=[1, 4, 8, 16],
                            verify_seconds=[0.04, 0.06, 0.09, 0.13], instruction_set=instruction_set)
    assert any("(here 8 tokens cost 2.25x one token's)" in line for line in instruction_set_lines(timed)) == warned
    on_gpu = HardwareProfile(device="cuda", dtype=dtype, num_threads=2, context_length=16, verify_tokens=[1],
                             verify_seconds=[0.01])
    assert instruction_set_lines(on_gpu) == []


def test_profile_cli_measures_a_model_of_ones_own(tmp_path, capsys):
    """``hf-adaptive-spec profile --model FOLDER``: any causal LM, not only the embedded default."""
    from hf_adaptive_spec.core import CostCurve
    from hf_adaptive_spec.core.cost_curve import cpu_instruction_set
    from hf_adaptive_spec.profiling import cli

    folder = tmp_path / "model"
    _saved_tiny_model(folder)
    out = tmp_path / "profile.json"
    argv = ["--model", str(folder), "--json", str(out), "--verify-tokens", "1,4", "--repeats", "1",
            "--context-length", "16", "--drafter-layers", "2"]
    assert cli.main(argv) == 0
    profile = HardwareProfile.load(out)
    assert profile.verify_tokens == [1, 4] and profile.draft_step_seconds > 0
    assert profile.catch_up_tokens[-1] > 16 and all(seconds > 0 for seconds in profile.catch_up_seconds)  # the prompt's
    assert (profile.cost_curve() == CostCurve("cpu", "float32", "eager", cpu_instruction_set())
            and profile.buckets is None)
    assert (profile.instruction_set == cpu_instruction_set()
            and f"instruction set: {profile.instruction_set}" in capsys.readouterr().out)
    assert cli.main([*argv, "--static"]) == 0  # the static path measures (at least) the engine's buckets
    profile = HardwareProfile.load(out)
    assert profile.buckets == [8, 12, 16, 32] and profile.verify_tokens == [1, 4, 8, 12, 16, 32]
    assert len(profile.bucket_seconds) == 4 and all(seconds > 0 for seconds in profile.bucket_seconds)
    assert profile.cache_slots == 512  # the engine's own cache for 16 tokens of context
    assert cli.main([*argv, "--static", "--cache-slots", "200"]) == 0
    assert HardwareProfile.load(out).cache_slots == 200
    assert cli.main([*argv, "--static", "--buckets", "4,2"]) == 0  # a curve where small trees win: their buckets
    with_buckets = HardwareProfile.load(out)
    assert with_buckets.buckets == [2, 4] and len(with_buckets.bucket_seconds) == 2
    assert "bucket   2 inside generate" in capsys.readouterr().out
    for bad, message in ((["--buckets", "2,4"], "--buckets sets the static path's verification sizes: add --static"),
                         (["--buckets", "8,12,16,32"], "--buckets sets the static path's verification sizes"),
                         (["--static", "--buckets", "1,4"], "give sizes >= 2"),
                         (["--static", "--buckets", "two"], "--buckets: Buckets are sizes separated by commas")):
        with pytest.raises(SystemExit):
            cli.main([*argv, *bad])
        assert message in capsys.readouterr().err
    for bad, message in ((["--json", ""], "--json is empty: give the profile's path"),  # wrote the default profile
                         (["--drafter-layers", "0"], "--drafter-layers must be at least 1, got 0"),
                         (["--recording", str(tmp_path / "none")], "--recording: No recording in")):  # a traceback
        with pytest.raises(SystemExit):
            cli.main([*argv, *bad])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the eager path has no cache length to time in
        cli.main([*argv, "--cache-slots", "160"])
    assert "add --static or --compile" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # refused before any timing
        cli.main([*argv, "--static", "--cache-slots", "40"])
    assert ("--cache-slots 40 cannot hold --context-length 16 and what the profile writes after it"
            in capsys.readouterr().err)
    assert profile.cost_curve() == CostCurve("cpu", "float32", "static", cpu_instruction_set())


def test_profile_says_which_shipped_policies_fit_its_curve():
    from hf_adaptive_spec import checkpoints
    from hf_adaptive_spec.core import CostCurve
    from hf_adaptive_spec.profiling.ranking import shipped_policy_fit

    eager = "trained on cpu/float32/eager (AVX2)"  # the default policies: the eager float32 curve of an AVX2 EPYC
    assert all(line.endswith(f"{eager}; fits this curve")
               for curve in (CostCurve("cpu", "float32", "eager"), CostCurve("cpu", "float32", "eager", "AVX2"))
               for line in shipped_policy_fit(curve))
    assert all(line.endswith(f"{eager}; trained on another curve: retrain it on this profile")
               for line in shipped_policy_fit(CostCurve("cpu", "float32", "eager", "AMX")))
    curve = CostCurve("cpu", "bfloat16", "compiled")
    for name, line in zip(("ltd", "resps", "radar"), shipped_policy_fit(curve)):
        retrained = (name, curve.key) in checkpoints.SHIPPED_FOR_CURVE  # a variant shipped for this curve
        assert line.startswith(f"shipped {name} policy: ")
        assert line.endswith("trained on cpu/bfloat16/compiled (AVX512-BF16); fits this curve" if retrained else
                             f"{eager}; trained on another curve: retrain it on this profile")
    # LTD's variant, another processor
    ltd_on_amx = shipped_policy_fit(CostCurve("cpu", "bfloat16", "compiled", "AMX"))[0]
    assert ltd_on_amx.endswith("trained on cpu/bfloat16/compiled (AVX512-BF16); "
                               "trained on another curve: retrain it on this profile")


def test_profile_with_a_recording_recommends_the_policy_the_package_then_uses(tmp_path, monkeypatch):
    """``profile --recording`` ranks the recording's static trees on the curve it just measured and
    writes the winner into the profile; ``hfas.recommended_policy()`` reads it (default path from
    $HF_ADAPTIVE_SPEC_PROFILE). The shipped learned policies, trained for SmolLM2, are not ranked for this model,
    and the profile says so."""
    from hf_adaptive_spec.environments import record_replay
    from hf_adaptive_spec.environments.static_grid import rank_static_trees
    from hf_adaptive_spec.policies.base import TreeConfig
    from hf_adaptive_spec.profiling import cli

    folder, out = tmp_path / "model", tmp_path / "profile.json"
    model = _saved_tiny_model(folder)
    recording = record_replay(model, hfas.CausalLMDrafter.from_target_layers(model, 2), [prompt(9, seed=5)],
                              TreeConfig(depth=3, top_k=3, total_tokens=8), 16)
    recording.save(tmp_path / "recording")
    monkeypatch.setenv("HF_ADAPTIVE_SPEC_PROFILE", str(out))
    assert cli.main(["--model", str(folder), "--verify-tokens", "1,4,8", "--repeats", "1", "--context-length", "16",
                     "--drafter-layers", "2", "--recording", str(tmp_path / "recording")]) == 0
    profile = HardwareProfile.load(out)
    ranked = rank_static_trees(recording, profile)
    tree = profile.recommendation["tree"]
    shape = (tree["depth"], tree["top_k"], tree["total_tokens"])
    recommended = next(ranked_tree for ranked_tree in ranked
                       if (ranked_tree.depth, ranked_tree.top_k, ranked_tree.total_tokens) == shape)
    # the best again, up to the policy's own time, measured in each replay (two trees can be that close on a tiny model)
    assert recommended.tau == tree["tau"] and recommended.tokens_per_second >= 0.99 * ranked[0].tokens_per_second
    best = recommended
    assert profile.recommendation["policy"] is None
    for entry in profile.recommendation["policies"].values():  # trained for SmolLM2 and its drafter: not replayed here
        assert entry == {"not_for_this_model": entry["not_for_this_model"]}
        assert "trained for HuggingFaceTB/SmolLM2-135M-Instruct" in entry["not_for_this_model"]
    policy = hfas.recommended_policy()
    assert isinstance(policy, hfas.StaticTreePolicy)
    assert ((policy.config.depth, policy.config.top_k, policy.config.total_tokens)
            == (best.depth, best.top_k, best.total_tokens))
    assert (profile.model, profile.drafter) == (str(folder.resolve()), "early exit: 2 layers")  # what it timed
    assert hfas.recommended_policy(model=AutoModelForCausalLM.from_pretrained(folder)).config == policy.config
    with pytest.raises(ValueError, match="timed the target .*model, not HuggingFaceTB/SmolLM2-135M-Instruct"):
        hfas.recommended_policy(model="HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(ValueError, match="timed the drafter early exit: 2 layers, not hf_adaptive_spec:eagle3-smollm2"):
        recommended_tree(drafter=shipped_checkpoint("eagle3"))
    _a_profile_from_another_processor_is_refused(profile)


def test_a_recording_with_no_positions_is_refused_before_any_timing_and_never_ranked(tmp_path, capsys):
    """A recording whose generations all ended at their first token holds no cycle: ranked, every tree replayed at
    0 tokens/s and plain steps were saved as the recommendation before the report divided by 0. It is refused by
    name, before timing and before anything is written; a replay of no cycles has no τ or speed."""
    from hf_adaptive_spec.environments import ReplayEnvironment, ReplayRecording
    from hf_adaptive_spec.policies.base import TreeConfig
    from hf_adaptive_spec.profiling import cli
    from hf_adaptive_spec.profiling.ranking import recommend

    empty = ReplayRecording(TreeConfig(3, 3, 8), vocab_size=64, max_new_tokens=16, prompts=[[], []],
                            prompt_ids=[[1, 2], [3, 4]])
    empty.save(tmp_path / "empty")
    out = tmp_path / "profile.json"
    with pytest.raises(SystemExit):
        cli.main(["--recording", str(tmp_path / "empty"), "--json", str(out), "--verify-tokens", "1,4"])
    assert f"['{tmp_path / 'empty'}'] hold no positions" in capsys.readouterr().err and not out.exists()
    profile = HardwareProfile("cpu", "float32", 1, 16, verify_tokens=[1, 8], verify_seconds=[0.01, 0.02],
                              draft_step_seconds=0.001)
    with pytest.raises(ValueError, match=r"\['empty'\] hold no positions .*--max-new-tokens N"):
        recommend(profile, [empty], ["empty"], (0,))
    result = ReplayEnvironment(empty, profile).replay(hfas.StaticTreePolicy(2, 3, 4))
    for figure in ("tokens_per_second", "mean_accepted_tokens"):
        with pytest.raises(ValueError, match="No cycle was replayed on 2 prompts"):
            getattr(result, figure)


def test_the_profile_is_saved_only_once_its_report_is_made(tmp_path, monkeypatch):
    """A report that fails (here: a recommendation that cannot be described) leaves no profile behind for
    recommended_policy() to read."""
    from hf_adaptive_spec.profiling import cli

    profile = HardwareProfile("cpu", "float32", 1, 16, verify_tokens=[1, 8], verify_seconds=[0.01, 0.02],
                              draft_step_seconds=0.001, policy_call_seconds=0.0, catch_up_tokens=[1.0],
                              catch_up_seconds=[0.002], recommendation={"tree": {}})
    monkeypatch.setattr(cli, "measure_profile", lambda args: (profile, 0.0))
    out = tmp_path / "profile.json"
    with pytest.raises(KeyError):
        cli.main(["--json", str(out), "--verify-tokens", "1,8"])
    assert not out.exists()


def _a_profile_from_another_processor_is_refused(profile):
    """The profile's costs are its processor's: one copied from a CPU with other matrix instructions is refused
    with the fix; one that did not record its instruction set is read as it is."""
    from hf_adaptive_spec.core.cost_curve import cpu_instruction_set

    assert profile.instruction_set == cpu_instruction_set()
    profile.instruction_set = "AMX" if profile.instruction_set != "AMX" else "AVX2"
    with pytest.raises(ValueError, match=f"measured on a cpu with {profile.instruction_set} and this one has "
                                         f"{cpu_instruction_set()}.*Run `hf-adaptive-spec profile --device cpu "
                                         "--recording DIR` on this machine"):
        hfas.recommended_policy(profile)
    profile.instruction_set = None
    assert isinstance(hfas.recommended_policy(profile), hfas.StaticTreePolicy)


def _saved_tiny_model(folder):
    """A tiny Llama and a character tokenizer with a chat template, saved to ``folder`` as a user's local model."""
    from tiny_models import make_char_tokenizer, tiny_model

    model = tiny_model("llama")
    model.save_pretrained(folder)
    tokenizer = make_char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'][:20] }}{% endfor %}"
    tokenizer.save_pretrained(folder)
    return model


def _recorded_folder(folder, **manifest):
    """A ``record`` output folder holding only its manifest (what the profile compares)."""
    folder.mkdir()
    (folder / "record_args.json").write_text(json.dumps({"drafter": "eagle3", **manifest}), encoding="utf-8")
    return str(folder)


def test_profile_times_the_target_and_drafter_its_recordings_were_made_with(tmp_path, capsys):
    from hf_adaptive_spec.profiling.cli import time_the_recorded_pair

    parser = argparse.ArgumentParser()
    shipped, own = _recorded_folder(tmp_path / "shipped", eagle3_checkpoint=None), tmp_path / "own"
    own_drafter = tmp_path / "drafter"
    own_drafter.mkdir()
    args = argparse.Namespace(recording=[shipped], model=None, eagle3=None)
    time_the_recorded_pair(parser, args)
    assert args.eagle3 == str(shipped_checkpoint("eagle3"))  # not an early exit's draft step
    time_the_recorded_pair(parser, argparse.Namespace(recording=[shipped], model=None, eagle3=args.eagle3))
    refused = [
        (argparse.Namespace(recording=[shipped], model=None, eagle3=str(own_drafter)),
         "drafted by hf_adaptive_spec:eagle3"),
        (argparse.Namespace(recording=[shipped], model="org/other", eagle3=None), "not org/other"),
        (argparse.Namespace(recording=[shipped, _recorded_folder(own, eagle3_checkpoint=str(own_drafter))], model=None,
                            eagle3=None), "different targets or drafters"),
    ]
    for args, message in refused:
        with pytest.raises(SystemExit):
            time_the_recorded_pair(parser, args)
        assert message in capsys.readouterr().err


def test_eager_verification_is_timed_as_generate_verifies_each_size(monkeypatch):
    """The eager profile times each size as generate's cycles verify it (a bare forward timed size after size
    mispriced them on the EPYC): one static tree per size, the root alone for one token, the sizes taken in turn
    cycle by cycle inside each call (timed a call per size, the machine's drift between calls ranked them by noise),
    the first call a warm-up."""
    from hf_adaptive_spec.profiling.measure import measure_verification_in_generate

    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    calls, real = [], model.generate

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(out.speculation)
        out.speculation.verify_times = [0.001 * n for n in out.speculation.verified_tokens]  # 1 ms a token
        return out

    monkeypatch.setattr(model, "generate", spy)
    seconds = measure_verification_in_generate(model, prompt(12), drafter, [1, 4, 6], rounds=2, cycles_per_size=2)
    assert seconds == pytest.approx([0.001, 0.004, 0.006])  # each cycle counted for its own size
    assert len(calls) == 3  # a warm-up, then the rounds
    for stats in calls:
        assert stats.cycles >= 6 and len(stats.verify_times) == stats.cycles
        full = stats.verified_tokens[:6]  # the first rotations: no tree cut short by max_new_tokens
        assert full == [1, 4, 6, 1, 4, 6]  # every cycle verified its size, in turn


def test_buckets_are_timed_in_turn_inside_each_call_in_the_cache_reset_between_calls(monkeypatch):
    """The static path's buckets are timed as the eager sizes are (timed a call per bucket, the drift between calls
    put bucket 12 below bucket 8 on an AMX Xeon): a tree filling each bucket, the buckets in turn cycle by cycle, each
    call in the one cache of ``cache_length`` slots, emptied before it; each cycle counted for its own bucket."""
    from hf_adaptive_spec.profiling.measure import measure_buckets_in_generate

    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    calls, real = [], model.generate

    def spy(*args, **kwargs):
        cache = kwargs["past_key_values"]
        assert cache.get_seq_length() == 0 and cache.layers[0].max_cache_len == 512  # emptied before each call
        out = real(*args, **kwargs)
        calls.append(out.speculation)
        out.speculation.verify_times = [0.001 * n for n in out.speculation.verified_tokens]  # 1 ms a token
        return out

    monkeypatch.setattr(model, "generate", spy)
    seconds = measure_buckets_in_generate(model, prompt(12), drafter, [8, 12], cache_length=512, rounds=2,
                                          cycles_per_size=2)
    assert seconds == pytest.approx([0.008, 0.012])
    assert len(calls) == 3  # a warm-up, then the rounds
    for stats in calls:
        assert stats.verified_tokens[:4] == [8, 12, 8, 12]  # every cycle filled its bucket, in turn


def test_verification_times_are_made_non_decreasing_in_size():
    """A dip in the measured curve is noise a replay would pick a tree from: adjacent sizes that cost less than a
    smaller one are pooled to their mean (the least-squares non-decreasing fit), the rest left as measured."""
    from hf_adaptive_spec.profiling.measure import monotone_seconds

    assert monotone_seconds([0.10, 0.18, 0.20, 0.18, 0.21, 0.22]) == pytest.approx([0.10, 0.18, 0.19, 0.19, 0.21, 0.22])
    assert monotone_seconds([0.10, 0.20, 0.19, 0.18, 0.25]) == pytest.approx([0.10, 0.19, 0.19, 0.19, 0.25])
    assert monotone_seconds([0.3, 0.2, 0.1]) == pytest.approx([0.2, 0.2, 0.2])
    assert monotone_seconds([0.1, 0.2]) == [0.1, 0.2]


def test_profile_refuses_a_recording_drafted_by_other_weights_of_its_drafter(tmp_path, monkeypatch, capsys):
    """A drafter retrained in its folder keeps its name: a profile timing the new weights refuses to rank a recording
    whose manifest records the old weights' digest (the ranking would weigh the old drafter's acceptance)."""
    from hf_adaptive_spec.environments import record_replay
    from hf_adaptive_spec.policies.base import TreeConfig
    from hf_adaptive_spec.profiling import cli

    model = tiny_model("llama")
    folder = tmp_path / "recording"
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    record_replay(model, drafter, [prompt(9, seed=5)], TreeConfig(depth=2, top_k=2, total_tokens=4), 8).save(folder)
    old = drafter.weights_digest()  # as record writes it, in record_args.json and recording.json alike
    (folder / "record_args.json").write_text(json.dumps({"drafter": "eagle3", "drafter_weights": old}))
    timed = HardwareProfile("cpu", "float32", 1, 16, [1, 4], [1.0, 1.2], draft_step_seconds=0.1,
                            policy_call_seconds=0.0,
                            catch_up_tokens=[1], catch_up_seconds=[0.1],
                            drafter="org/drafter", drafter_weights="new")
    monkeypatch.setattr(cli, "time_the_recorded_pair", lambda parser, args: None)
    monkeypatch.setattr(cli, "measure_profile", lambda args: (timed, 0.0))
    argv = ["--recording", str(folder), "--json", str(tmp_path / "profile.json")]
    with pytest.raises(SystemExit):
        cli.main(argv)
    assert "timed drafter weights with digest new, and the recording" in capsys.readouterr().err
    assert not (tmp_path / "profile.json").exists()
    timed.drafter_weights = old
    assert cli.main(argv) == 0 and HardwareProfile.load(tmp_path / "profile.json").recommendation is not None


def test_profile_times_the_lookup_first_cycles_own_bucket_unless_buckets_are_given(tmp_path, monkeypatch):
    """Left out, ``--buckets`` is the engine's plus ``1 + L`` for each ranked branch length ``L`` on the static path:
    where the branch matched a lookup-first cycle verifies the root and the chain alone, in its own bucket."""
    from hf_adaptive_spec.environments import record_replay
    from hf_adaptive_spec.generation.static_path import DEFAULT_BUCKETS
    from hf_adaptive_spec.policies.base import TreeConfig
    from hf_adaptive_spec.profiling import cli

    model = tiny_model("llama")
    folder = tmp_path / "recording"
    record_replay(model, hfas.CausalLMDrafter.from_target_layers(model, 2), [prompt(9, seed=5)],
                  TreeConfig(depth=2, top_k=2, total_tokens=4), 8).save(folder)
    timed = []

    def measured(args):
        timed.append(tuple(args.buckets))
        raise KeyboardInterrupt  # the buckets are all this test reads

    monkeypatch.setattr(cli, "time_the_recorded_pair", lambda parser, args: None)
    monkeypatch.setattr(cli, "measure_profile", measured)
    for extra in (["--compile", "--lookup-tokens", "0,4"], ["--static", "--lookup-tokens", "1,2,4"],
                  ["--compile", "--lookup-tokens", "0,4", "--buckets", "2,8"], ["--compile"], ["--lookup-tokens", "4"]):
        with pytest.raises(KeyboardInterrupt):
            cli.main(["--recording", str(folder), "--json", str(tmp_path / "profile.json"), *extra])
    assert timed == [(5, *DEFAULT_BUCKETS), (2, 3, 5, *DEFAULT_BUCKETS), (2, 8), DEFAULT_BUCKETS, DEFAULT_BUCKETS]


def test_with_recordings_one_token_and_each_recordings_largest_tree_are_timed_or_the_ranking_is_refused(
    tmp_path, monkeypatch, capsys
):
    """``--verify-tokens 4,8 --recording R`` (R verifies up to 16 tokens) also times 1 token and 16, as ``record
    --profile`` does; an eager profile that did not time them is refused for ranking (``recommend``, ``--rerank``),
    not priced from sizes never timed; the report names the smallest size it divides by."""
    from hf_adaptive_spec.environments import record_replay
    from hf_adaptive_spec.policies.base import TreeConfig
    from hf_adaptive_spec.profiling import cli
    from hf_adaptive_spec.profiling.ranking import recommend

    model = tiny_model("llama")
    folder = tmp_path / "recording"
    recording = record_replay(model, hfas.CausalLMDrafter.from_target_layers(model, 2), [prompt(9, seed=5)],
                              TreeConfig(depth=4, top_k=3, total_tokens=16), 8)
    recording.save(folder)
    timed = []

    def measured(args):
        timed.append(args.verify_tokens)
        raise KeyboardInterrupt  # the sizes are all this test reads

    monkeypatch.setattr(cli, "time_the_recorded_pair", lambda parser, args: None)
    monkeypatch.setattr(cli, "measure_profile", measured)
    for argv in (["--recording", str(folder)], [], ["--recording", str(folder), "--lookup-tokens", "2"],
                 ["--recording", str(folder), "--lookup-tokens", "0,4", "--static"]):
        with pytest.raises(KeyboardInterrupt):
            cli.main(["--verify-tokens", "8,4", "--json", str(tmp_path / "profile.json"), *argv])
    # ranked with a 2-token branch, and the shipped policies replayed with the 4-token one they were trained with, the
    # eager path's 16-token trees verify 18 and 20: timed, not extrapolated, and 16 too (every ranking ranks without
    # a branch); a bucketed profile prices a tree at its bucket, so the static path compiles no graph for them
    assert timed == ["1,4,8,16,20", "4,8", "1,4,8,16,18,20", "1,4,8,16"]
    narrow = HardwareProfile("cpu", "float32", 1, 16, verify_tokens=[2, 8], verify_seconds=[0.01, 0.02],
                             draft_step_seconds=0.001, policy_call_seconds=0.0, catch_up_tokens=[1.0],
                             catch_up_seconds=[0.002])
    with pytest.raises(ValueError, match=r"timed verifications of \[2, 8\] tokens, and replaying \['R'\] needs "
                                         r"\[1, 16\] too"):
        recommend(narrow, [recording], ["R"], (0,))
    narrow.save(tmp_path / "narrow.json")
    with pytest.raises(SystemExit):
        cli.main(["--rerank", "--recording", str(folder), "--json", str(tmp_path / "narrow.json")])
    assert "needs [1, 16] too" in capsys.readouterr().err
    assert cli.profile_report(narrow, tmp_path, None)[1].endswith("(2.00x 2 tokens)")


def test_a_learned_policy_is_recommended_only_on_its_own_curve_and_beyond_the_replay_margin(monkeypatch):
    from hf_adaptive_spec.environments.static_grid import RankedTree
    from hf_adaptive_spec.profiling import ranking

    ranked = [RankedTree(3, 4, 12, 2.0, 10.0), RankedTree(0, 4, 1, 1.0, 6.0)]
    monkeypatch.setattr(ranking, "rank_over_recordings", lambda *args: ranked)
    profile = HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0], draft_step_seconds=0.1)
    for entries, chosen in [
        ({"ltd": (True, 11.0), "resps": (True, 12.0), "radar": (False, 20.0)}, "resps"),  # radar: another curve
        ({"ltd": (True, 9.0), "resps": (True, None), "radar": (False, 20.0)}, None),  # ltd slower than the tree
        ({"ltd": (True, 10.2), "resps": (True, 10.35), "radar": (False, 20.0)}, None),  # leads inside the margin
        ({"ltd": (True, 10.2), "resps": (True, 10.45), "radar": (False, 20.0)}, "resps"),  # just beyond it
    ]:
        def replay(name, *args, entries=entries):
            fits, speed = entries[name]
            return {"fits_curve": fits, "trained_on": "x",
                    **({"tokens_per_second": speed, "lookup_tokens": 0} if speed else {})}

        monkeypatch.setattr(ranking, "shipped_policy_replay", replay)
        recommendation = ranking.recommend(profile, [], [], (0,))
        assert recommendation["policy"] == chosen and recommendation["tree"]["total_tokens"] == 12
        assert recommendation["plain_tokens_per_second"] == 6.0
    profile.recommendation = recommendation
    lines = ranking.recommendation_lines(profile)
    assert ("shipped ltd policy: fits this curve; replayed 1.020x the best static tree, "
            "within the replay's 4% margin: not a lead") in lines
    assert "shipped resps policy: fits this curve; replayed 1.045x the best static tree" in lines
    assert lines[-1].startswith("recommended: the shipped resps policy")


def test_recommended_policy_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="hf-adaptive-spec profile --recording"):
        hfas.recommended_policy(tmp_path / "none.json")
    bare = HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0])
    with pytest.raises(ValueError, match="recommends nothing: it was measured without a recording"):
        hfas.recommended_policy(bare)
    tree = {"depth": 2, "top_k": 2, "total_tokens": 4}
    compiled = HardwareProfile("cuda", "bfloat16", 1, 64, [1, 8], [1.0, 1.0], path="compiled",
                               recommendation={"policy": "ltd", "tree": tree})  # a curve no ltd variant is shipped for
    with pytest.raises(ValueError,
                       match=r"trained on cpu/float32/eager \(AVX2\) and the profile measured cuda/bfloat16/compiled"):
        hfas.recommended_policy(compiled)


@pytest.mark.parametrize("args, message", [
    (["--verify-tokens", "0,2"], "--verify-tokens must be positive integers"),
    (["--verify-tokens", "1,x"], "--verify-tokens must be positive integers"),
    (["--context-length", "0"], "--context-length must be at least 1, got 0"),
    (["--repeats", "0"], "--repeats must be at least 1, got 0"),
    (["--num-threads", "0"], "--num-threads must be at least 1, got 0"),
    (["--lookup-tokens", "4"], "--lookup-tokens ranks recordings .* with --recording"),
])
def test_sizes_that_would_fail_or_be_ignored_are_refused_before_any_timing(args, message, capsys):
    from hf_adaptive_spec.profiling import cli

    with pytest.raises(SystemExit):
        cli.main(["--model", "/nonexistent-model-folder", *args])
    assert re.search(message, capsys.readouterr().err)


def test_a_shipped_policy_that_changes_top_k_replays_on_one_recording_per_top_k(monkeypatch):
    """Re-SpS's actions may span several top_k: no single recording holds them, the recordings together do."""
    from tiny_models import tiny_model

    from hf_adaptive_spec.environments import MultiReplayEnvironment, record_replay
    from hf_adaptive_spec.policies.base import TreeConfig
    from hf_adaptive_spec.profiling import ranking

    target = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(target, 2)
    prompts = [prompt(7, seed=11), prompt(15, seed=12)]
    recordings = [record_replay(target, drafter, prompts, TreeConfig(depth=3, top_k=k, total_tokens=8), 16)
                  for k in (2, 3)]
    profile = HardwareProfile("cpu", "float32", 1, 64, [1, 4, 16], [1.0, 1.5, 3.0], draft_step_seconds=0.1)

    class SwitchesTopK(hfas.DraftPolicy):
        trained_on = profile.cost_curve()

        def tree_config(self, state):
            return TreeConfig(depth=3, top_k=2 if state.context_length % 2 else 3, total_tokens=8)

    monkeypatch.setattr(ranking, "shipped_checkpoint", lambda name, curve=None: name)
    monkeypatch.setattr(ranking.AutoDraftPolicy, "from_pretrained", staticmethod(lambda name: SwitchesTopK()))
    entry = ranking.shipped_policy_replay("resps", profile, recordings, 0)
    expected = MultiReplayEnvironment(recordings, profile).replay(SwitchesTopK())
    assert "not_replayed" not in entry and entry["tau"] == expected.mean_accepted_tokens


def _fast_shipped_policies(monkeypatch):
    """A ranking and shipped-policy replays in which every shipped policy fits the curve and beats the tree."""
    from hf_adaptive_spec.environments.static_grid import RankedTree
    from hf_adaptive_spec.profiling import ranking

    monkeypatch.setattr(ranking, "rank_over_recordings",
                        lambda *args: [RankedTree(3, 4, 12, 2.0, 10.0), RankedTree(0, 4, 1, 1.0, 6.0)])
    monkeypatch.setattr(ranking, "shipped_policy_replay",
                        lambda name, *args: {"fits_curve": True, "trained_on": "cpu/float32/eager",
                                             "tokens_per_second": 20.0, "lookup_tokens": args[-1]})
    return ranking


def test_the_shipped_policies_are_recommended_only_for_the_model_and_drafter_they_were_trained_for(monkeypatch):
    """They were trained for SmolLM2-135M-Instruct with its shipped EAGLE-3 drafter: a profile of another target or
    drafter names them as another model's, says what to pass instead, and never recommends them."""
    from hf_adaptive_spec.core import CostCurve
    from hf_adaptive_spec.profiling.identity import eagle3_name

    ranking = _fast_shipped_policies(monkeypatch)
    costs = dict(device="cpu", dtype="float32", num_threads=1, context_length=64, verify_tokens=[1, 8],
                 verify_seconds=[1.0, 1.0], draft_step_seconds=0.1)
    shipped = HardwareProfile(**costs, model="HuggingFaceTB/SmolLM2-135M-Instruct", drafter=eagle3_name(None))
    assert ranking.recommend(shipped, [], [], (0,))["policy"] == "ltd"  # the pair they were trained for
    for model, drafter in (("org/my-model", "org/my-drafter"),
                           ("HuggingFaceTB/SmolLM2-135M-Instruct", "org/my-drafter")):
        other = HardwareProfile(**costs, model=model, drafter=drafter)
        other.recommendation = ranking.recommend(other, [], [], (0,))
        assert other.recommendation["policy"] is None
        lines = ranking.recommendation_lines(other)
        for name in ("ltd", "resps", "radar"):
            line = next(line for line in lines if line.startswith(f"shipped {name} policy"))
            assert ("not for the target and drafter profiled" in line
                    and "trained for HuggingFaceTB/SmolLM2-135M-Instruct" in line)
            assert f"--{name}-policy DIR" in line and "fits this curve" not in line
        assert lines[-1].startswith("recommended: the static tree above")
        other.recommendation = None  # without a recording: the curve alone is not enough to say they fit
        assert all("not for the target and drafter profiled" in line for line in ranking.shipped_policy_fit(
            CostCurve("cpu", "float32", "eager"), ranking.shipped_policies_misfit(model, drafter)))
    tree = {"depth": 2, "top_k": 2, "total_tokens": 4}
    written_before = HardwareProfile(**costs, model="org/my-model", drafter="org/my-drafter",
                                     recommendation={"policy": "radar", "tree": tree})  # by a profile before the check
    with pytest.raises(ValueError, match=r"recommends the shipped radar policy, but the shipped policies were "
                                         r"trained for HuggingFaceTB/SmolLM2-135M-Instruct .* "
                                         r"not for the target org/my-model"):
        hfas.recommended_policy(written_before)


def test_a_recommendation_of_a_shipped_policy_with_another_branch_than_it_was_trained_with_is_refused():
    """A profile written before policies recorded their branch could recommend the shipped LTD policy without it
    (``generate`` would then report it as misused); it is refused with the fix, and read with its own branch."""
    from hf_adaptive_spec.profiling.identity import eagle3_name

    def written(lookup_tokens):
        return HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0], model="HuggingFaceTB/SmolLM2-135M-Instruct",
                               drafter=eagle3_name(None),
                               recommendation={"policy": "ltd", "tree": {"depth": 2, "top_k": 2, "total_tokens": 4},
                                               "lookup_tokens": lookup_tokens})

    with pytest.raises(ValueError, match=r"recommends the shipped ltd policy with prompt_lookup_num_tokens=None, "
                                         r"but it was trained with 4 prompt-lookup tokens.*profile --recording DIR"):
        hfas.recommended_policy(written(0))
    with pytest.warns(UserWarning, match="pass prompt_lookup_num_tokens=4 to generate too"):
        assert isinstance(hfas.recommended_policy(written(4)), hfas.LTDPolicy)
    assert hfas.recommended_generate_kwargs(written(4))["prompt_lookup_num_tokens"] == 4


def _eagle3_folder(target, folder, seed: int):
    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    torch.manual_seed(seed)
    Eagle3DraftModel.from_target(target, initializer_range=0.3).save_pretrained(folder)
    return folder


def test_recommended_policy_takes_the_drafter_object_and_knows_it_by_its_weights(tmp_path):
    """``recommended_policy(model=model, drafter=drafter)`` with the loaded Eagle3Drafter: matched to the profile by a
    digest of its weights (whatever dtype it was loaded in); another drafter's weights, or a profile that kept no
    digest, are refused by name; the profile CLI keeps the digest of the drafter it times."""
    from hf_adaptive_spec.profiling import cli
    from hf_adaptive_spec.profiling.identity import eagle3_name, model_name

    folder, out = tmp_path / "model", tmp_path / "profile.json"
    _saved_tiny_model(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    mine, other = _eagle3_folder(model, tmp_path / "mine", 1), _eagle3_folder(model, tmp_path / "other", 2)
    assert cli.main(["--model", str(folder), "--json", str(out), "--verify-tokens", "1,4", "--repeats", "1",
                     "--context-length", "16", "--eagle3", str(mine)]) == 0
    drafter = hfas.Eagle3Drafter.from_pretrained(mine, target=model)
    profile = HardwareProfile.load(out)
    assert (profile.model, profile.drafter) == (model_name(model), eagle3_name(mine))
    assert profile.drafter_weights == drafter.weights_digest()
    profile.recommendation = {"policy": None, "tree": {"depth": 2, "top_k": 2, "total_tokens": 4}}
    policy = hfas.recommended_policy(profile, model=model, drafter=drafter)
    assert (policy.config.depth, policy.config.top_k, policy.config.total_tokens) == (2, 2, 4)
    assert recommended_tree(profile, model=model, drafter=str(mine)).total_tokens == 4  # the checkpoint, as before
    in_bfloat16 = hfas.Eagle3Drafter.from_pretrained(mine, target=model.to(torch.bfloat16))
    assert in_bfloat16.weights_digest() == profile.drafter_weights  # one checkpoint, one digest
    model.float()
    with pytest.raises(ValueError, match=r"timed the drafter .*mine, and this drafter's weights are not its"):
        hfas.recommended_policy(profile, model=model, drafter=hfas.Eagle3Drafter.from_pretrained(other, target=model))
    profile.drafter_weights = None  # a profile made before the digest was kept
    with pytest.raises(ValueError, match=r"records no digest of its drafter's weights .* pass its checkpoint instead"):
        hfas.recommended_policy(profile, model=model, drafter=drafter)
    with pytest.raises(TypeError, match="takes an EAGLE-3 checkpoint .* or an Eagle3Drafter, not CausalLMDrafter"):
        hfas.recommended_policy(profile, model=model, drafter=hfas.CausalLMDrafter.from_target_layers(model, 2))


def test_recommended_buckets_are_the_ones_the_profile_ranked_its_tree_on():
    """``hfas.fast_path(model, buckets=hfas.recommended_buckets())``: a profile timed with ``--buckets 2,4`` gives
    them back; one of the eager path, which pads nothing, gives the engine's default."""
    from hf_adaptive_spec.generation.static_path import DEFAULT_BUCKETS

    tree = {"depth": 1, "top_k": 1, "total_tokens": 2, "tau": 1.5, "tokens_per_second": 10.0}
    compiled = HardwareProfile("cpu", "float32", 1, 64, [1, 2, 4], [1.0, 1.2, 1.5], path="compiled", buckets=[2, 4],
                               bucket_seconds=[1.2, 1.5], recommendation={"tree": tree, "policy": None})
    assert hfas.recommended_buckets(compiled) == (2, 4)
    eager = HardwareProfile("cpu", "float32", 1, 64, [1, 2], [1.0, 1.2], recommendation={"tree": tree, "policy": None})
    with pytest.warns(UserWarning, match="times the eager path, which pads no tree.*profile --compile"):
        assert hfas.recommended_buckets(eager) == DEFAULT_BUCKETS


def test_a_profile_is_refused_for_a_model_on_another_device_or_dtype_and_its_tree_carries_its_curve():
    """Given the loaded model, a profile measured in another dtype or on another device type is refused, naming
    both and the `profile --device --dtype` that times the model's (`profile --device auto` would time a GPU where
    there is one); the recommended static tree records the profile's curve, so that generate reports a call on another
    (here: no model given, a bfloat16 call on a float32 profile)."""
    from hf_adaptive_spec.core.cost_curve import cpu_instruction_set

    tree = {"depth": 2, "top_k": 2, "total_tokens": 4, "tau": 2.0, "tokens_per_second": 10.0}
    profile = HardwareProfile("cpu", "float32", 1, 64, [1, 4], [1.0, 1.2], draft_step_seconds=0.1,
                              instruction_set=cpu_instruction_set(), recommendation={"tree": tree, "policy": None})
    model = tiny_model("llama").to(torch.bfloat16)
    for recommended in (hfas.recommended_policy, hfas.recommended_generate_kwargs, recommended_tree):
        with pytest.raises(ValueError, match=r"measured on cpu in float32 and the model is on cpu in bfloat16.*"
                                             r"dtype=torch.float32.*profile --device cpu --dtype bfloat16"):
            recommended(profile, model=model)
    on_gpu = HardwareProfile("cuda", "float32", 1, 64, [1, 4], [1.0, 1.2],
                             recommendation={"tree": tree, "policy": None})
    with pytest.raises(ValueError, match="measured on cuda in float32 and the model is on cpu in float32.*"
                                         "`hf-adaptive-spec profile --device cpu --dtype float32 --recording DIR`"):
        hfas.recommended_policy(on_gpu, model=model.float())
    policy = hfas.recommended_policy(profile, model=model.float())
    assert policy.trained_on == profile.cost_curve()
    out = model.to(torch.bfloat16).generate(
        prompt(8, seed=1), max_new_tokens=6, do_sample=False, return_dict_in_generate=True,
        assistant_model=hfas.CausalLMDrafter.from_target_layers(model, 2), **hfas.recommended_generate_kwargs(profile))
    assert "chosen for the cpu/float32/eager" in out.speculation.policy_cost_curve_mismatch


def _lookup_profile(tree: dict, lookup_tokens: int) -> HardwareProfile:
    return HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0],
                           recommendation={"tree": {**tree, "lookup_tokens": lookup_tokens}, "policy": None,
                                           "lookup_tokens": lookup_tokens})


def test_a_recommended_lookup_branch_comes_with_the_policy_and_is_never_silently_dropped():
    """The prompt-lookup branch is a generate argument: recommended_generate_kwargs carries it with the policy, and
    recommended_policy alone warns that it must be passed too (the branch alone, without it, is plain steps)."""
    import warnings

    alone = _lookup_profile({"depth": 0, "top_k": 4, "total_tokens": 1, "tau": 1.3, "tokens_per_second": 28.7}, 1)
    kwargs = hfas.recommended_generate_kwargs(alone)
    assert kwargs["prompt_lookup_num_tokens"] == 1 and hfas.recommended_lookup_tokens(alone) == 1
    assert kwargs["assistant_policy"].config.depth == 0
    with pytest.warns(UserWarning,
                      match="prompt_lookup_num_tokens=1 to generate too .*drafts nothing: plain one-token steps"):
        hfas.recommended_policy(alone)
    drafted = _lookup_profile({"depth": 1, "top_k": 4, "total_tokens": 2, "tau": 1.6, "tokens_per_second": 26.0}, 2)
    with pytest.warns(UserWarning, match="prompt_lookup_num_tokens=2 to generate too .*is slower than ranked"):
        hfas.recommended_policy(drafted)
    first = _lookup_profile({"depth": 1, "top_k": 4, "total_tokens": 2, "tau": 1.5, "tokens_per_second": 31.6,
                             "lookup_first": True}, 1)
    kwargs = hfas.recommended_generate_kwargs(first)
    assert isinstance(kwargs["assistant_policy"], hfas.LookupFirstPolicy) and kwargs["prompt_lookup_num_tokens"] == 1
    assert kwargs["assistant_policy"].config.total_tokens == 2
    without = _lookup_profile({"depth": 1, "top_k": 4, "total_tokens": 2, "tau": 1.5, "tokens_per_second": 27.0}, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hfas.recommended_generate_kwargs(without).keys() == {"assistant_policy"}
        assert hfas.recommended_policy(without).config.total_tokens == 2


def test_the_profile_ranks_each_lookup_branch_and_the_branch_alone_against_plain_steps(monkeypatch):
    """``recommend`` ranks every lookup length asked for and no branch (plain steps stay the reference even when
    only a branch is asked for); the winner's branch is the recommendation's, and a learned policy that does not
    record the branch it was trained with is replayed with each, its fastest recorded for it."""
    from hf_adaptive_spec.environments.static_grid import RankedTree
    from hf_adaptive_spec.profiling import ranking

    asked = []

    def ranked(recordings, profile, counts):
        asked.append(counts)
        return [RankedTree(0, 4, 1, 1.3, 12.0, lookup_tokens=1), RankedTree(1, 4, 2, 1.5, 11.0),
                RankedTree(0, 4, 1, 1.0, 8.0)]

    monkeypatch.setattr(ranking, "rank_over_recordings", ranked)
    # policies that record none
    monkeypatch.setattr(ranking, "branches_to_replay", lambda name, profile, counts: counts)
    speeds = {0: 10.0, 1: 11.0}
    monkeypatch.setattr(ranking, "shipped_policy_replay", lambda name, profile, recordings, n: {
        "fits_curve": False, "trained_on": "x", "tokens_per_second": speeds[n], "lookup_tokens": n})
    profile = HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0], draft_step_seconds=0.1)
    profile.recommendation = ranking.recommend(profile, [], [], (1,))
    assert asked == [(0, 1)] and profile.recommendation["lookup_counts"] == [0, 1]
    assert profile.recommendation["lookup_tokens"] == 1 and profile.recommendation["plain_tokens_per_second"] == 8.0
    assert all(entry["lookup_tokens"] == 1 for entry in profile.recommendation["policies"].values())
    lines = ranking.recommendation_lines(profile)
    assert lines[0] == ("best static tree: the 1-token prompt-lookup branch alone, nothing drafted "
                        "(tau 1.30, modelled 1.50x plain steps)")
    assert "with prompt_lookup_num_tokens=1" in lines[-1] and "recommended_generate_kwargs" in lines[-1]


def test_a_policy_that_records_its_branch_is_replayed_with_that_branch_alone(monkeypatch):
    """With another branch ``generate`` reports it as misused (``policy_lookup_mismatch``): the profile must not
    recommend it with one, nor rank it by one."""
    from hf_adaptive_spec.profiling import ranking

    profile = HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0], draft_step_seconds=0.1)
    assert ranking.branches_to_replay("ltd", profile, (0, 1)) == (4,)  # the shipped ones were trained with 4 tokens
    for recorded, expected in ((None, (0, 1)), (0, (0,)), (2, (2,))):
        policy = hfas.StaticTreePolicy()
        policy.trained_with_lookup_tokens = recorded
        monkeypatch.setattr(ranking.AutoDraftPolicy, "from_pretrained", lambda path, policy=policy: policy)
        assert ranking.branches_to_replay("ltd", profile, (0, 1)) == expected


@pytest.mark.parametrize("text", ["-1", "1,x", ""])
def test_lookup_lengths_that_cannot_be_ranked_are_refused_before_any_timing(text, capsys):
    from hf_adaptive_spec.profiling import cli

    with pytest.raises(SystemExit):
        cli.main(["--model", "/nonexistent-model-folder", "--recording", "/nonexistent", "--lookup-tokens", text])
    assert (f"--lookup-tokens: expected branch lengths >= 0 separated by commas (0: no branch), e.g. 0,1,4; "
            f"got {text!r}" in capsys.readouterr().err)


def test_rerank_remakes_the_recommendation_on_new_recordings_with_the_profiles_own_costs(tmp_path, monkeypatch, capsys):
    """``profile --rerank`` ranks the given recordings on the timings already in the profile (nothing is timed) and
    replaces its recommendation; without a recording or a profile, or with a recording drafted by other weights
    than the profile timed, it refuses with the fix."""
    from hf_adaptive_spec.environments import load_recording, record_replay
    from hf_adaptive_spec.environments.static_grid import rank_static_trees
    from hf_adaptive_spec.policies.base import TreeConfig
    from hf_adaptive_spec.profiling import cli

    MANIFEST = {"drafter": "eagle3", "model": "org/tiny", "eagle3_checkpoint": "org/drafter"}
    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    digest = drafter.weights_digest()  # as record writes it, in record_args.json and recording.json alike
    folders = [tmp_path / "first", tmp_path / "second"]
    for folder, seed in zip(folders, (5, 6)):
        tree = TreeConfig(depth=3, top_k=2, total_tokens=8)
        record_replay(model, drafter, [prompt(9, seed=seed)], tree, 12).save(folder)
        (folder / "record_args.json").write_text(json.dumps(dict(MANIFEST, drafter_weights=digest)))
    timed = HardwareProfile("cpu", "float32", 1, 16, [1, 4, 8], [1.0, 1.1, 1.3], draft_step_seconds=0.05,
                            policy_call_seconds=0.0, catch_up_tokens=[1], catch_up_seconds=[0.05],
                            model="org/tiny", drafter="org/drafter", drafter_weights=digest)
    path = tmp_path / "profile.json"
    timed.save(path)
    monkeypatch.setattr(cli, "measure_profile", lambda args: pytest.fail("--rerank timed the machine"))
    assert cli.main(["--rerank", "--json", str(path), "--recording", str(folders[1])]) == 0
    reranked = HardwareProfile.load(path)
    best = rank_static_trees(load_recording(folders[1]), timed)[0]
    tree = reranked.recommendation["tree"]
    assert ((tree["depth"], tree["top_k"], tree["total_tokens"], tree["tau"])
            == (best.depth, best.top_k, best.total_tokens, best.tau))
    assert reranked.recommendation["recordings"] == [str(folders[1])]
    assert (reranked.verify_seconds, reranked.draft_step_seconds) == (timed.verify_seconds, timed.draft_step_seconds)
    assert "best static tree" in capsys.readouterr().out

    refused = [
        ({}, ["--rerank", "--json", str(path)], "pass at least one --recording"),
        ({}, ["--rerank", "--json", str(tmp_path / "none.json"), "--recording", str(folders[0])],
         "time this machine once"),
        ({"drafter_weights": "old"}, ["--rerank", "--json", str(path), "--recording", str(folders[0])],
         f"digest {digest}, and the recording"),
        ({"model": "org/other"}, ["--rerank", "--json", str(path), "--recording", str(folders[0])], "org/other"),
    ]
    for manifest, argv, message in refused:
        (folders[0] / "record_args.json").write_text(json.dumps({**MANIFEST, "drafter_weights": digest, **manifest}))
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert message in capsys.readouterr().err
    # a refusal leaves the profile as it was
    assert HardwareProfile.load(path).recommendation == reranked.recommendation


@pytest.mark.parametrize("flags, named", [
    (["--dtype", "bfloat16"], "--dtype"), (["--compile"], "--compile"), (["--model", "org/other"], "--model"),
    (["--num-threads", "2", "--eagle3", "ckpt"], "--num-threads, --eagle3"), (["--dtype", "float32"], "--dtype"),
    (["--verify-tokens=1,2"], "--verify-tokens"), (["--device", "cpu"], "--device"),
])
def test_rerank_refuses_the_timing_options_it_would_ignore(tmp_path, flags, named, capsys):
    """``--rerank`` times nothing: a timing option given with it (even at its default value) is refused by name
    before anything is read, not ignored."""
    from hf_adaptive_spec.profiling import cli

    with pytest.raises(SystemExit):
        cli.main(["--rerank", "--json", str(tmp_path / "p.json"), "--recording", str(tmp_path / "r"), *flags])
    assert f"times nothing: {named} would be ignored" in capsys.readouterr().err


def test_profile_times_on_the_device_asked_for_and_records_it(tmp_path, monkeypatch, capsys):
    """``profile --device`` (as ``bench --device``: auto, cpu, cuda, cuda:N) moves the target there before the drafter
    is built on it and anything is timed, and the profile records the device the target ran on."""
    from hf_adaptive_spec.profiling import cli

    folder, out = tmp_path / "model", tmp_path / "profile.json"
    _saved_tiny_model(folder)
    moved_to = []

    def load_and_watch(name, dtype, needed_for):
        model, tokenizer = cli_load_model(name, dtype, needed_for)
        move = model.to
        model.to = lambda device: moved_to.append(device) or move(device)
        return model, tokenizer

    cli_load_model = default_model.load_chat_model  # what the profile's --model loader calls
    monkeypatch.setattr(default_model, "load_chat_model", load_and_watch)
    assert cli.main(["--model", str(folder), "--json", str(out), "--device", "cpu", "--verify-tokens", "1,4",
                     "--repeats", "1", "--context-length", "16", "--drafter-layers", "2"]) == 0
    assert moved_to == [torch.device("cpu")] and HardwareProfile.load(out).device == "cpu"
    assert "timed on cpu in float32 (eager path)" in capsys.readouterr().out


@pytest.mark.parametrize("device, message", [
    ("cuda", "--device cuda was asked for, but torch sees no CUDA device: use --device cpu (or auto)"),
    ("cuda:0", "--device cuda:0 was asked for, but torch sees no CUDA device: use --device cpu"),
    ("foo", "--device 'foo' is not a device torch names: use auto, cpu, cuda or cuda:N"),
])
def test_a_device_this_machine_lacks_is_refused_before_the_model_loads(device, message, monkeypatch, capsys):
    from hf_adaptive_spec.profiling import cli

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without a GPU, as this one may not be
    monkeypatch.setattr(default_model, "load_chat_model",
                        lambda *args: pytest.fail("the model loaded before --device was checked"))
    with pytest.raises(SystemExit):
        cli.main(["--device", device, "--verify-tokens", "1,4"])
    assert message in capsys.readouterr().err


def test_a_profile_path_that_cannot_take_the_profile_is_refused_before_anything_loads(tmp_path, monkeypatch, capsys):
    """``--json`` at a folder, under a file, or at a bench report (which the profile would replace) is refused by
    name before the model loads; the profile it replaces (a profile, or a file of no known kind) is replaced."""
    from hf_adaptive_spec.profiling import arguments, cli

    monkeypatch.setattr(cli, "measure_profile", lambda args: pytest.fail("timed before --json was checked"))
    report, afile = tmp_path / "run.json", tmp_path / "notes.txt"
    report.write_text(json.dumps({"settings": {"model": "m"}, "records": [], "summary": {}}), encoding="utf-8")
    afile.write_text("notes", encoding="utf-8")
    refused = [([str(tmp_path)], f"--json {tmp_path} is a folder: give the profile's file, e.g. {tmp_path}/"),
               ([str(afile / "profile.json")], f"{afile} is a file, so the folder {afile} cannot be made"),
               ([str(report)], f"--json {report} holds a bench report (`hf-adaptive-spec bench --json` wrote it)"),
               ([str(report), "--rerank", "--recording", str(tmp_path / "rec")], "holds a bench report")]
    for json_path, message in refused:
        with pytest.raises(SystemExit):
            cli.main(["--json", *json_path])
        assert message in capsys.readouterr().err
    assert json.loads(report.read_text(encoding="utf-8"))["records"] == []  # the report is kept
    monkeypatch.setenv("HF_ADAPTIVE_SPEC_PROFILE", str(tmp_path))
    with pytest.raises(SystemExit):
        cli.main([])
    assert f"the default profile path {tmp_path} ($HF_ADAPTIVE_SPEC_PROFILE, else ~/.cache) is a folder" in (
        capsys.readouterr().err)
    assert arguments.is_bench_report(report) and not arguments.is_bench_report(afile)


@pytest.mark.parametrize("case, message", [
    ("no chat template", "its tokenizer has no chat template, and the profile times a chat-templated prompt"),
    ("too many layers", "--drafter-layers 8: num_layers must be an int in 1..3 for a 4-layer target, got 8"),
    ("another target's drafter", "This drafter was built for a 30-layer target; the target has 4 layers"),
    ("not reachable", "--model org/model: cannot load it: We couldn't connect to 'https://huggingface.co'"),
])
def test_what_fails_once_the_model_loads_fails_in_one_line_before_any_timing(case, message, tmp_path, monkeypatch,
                                                                               capsys):
    """A model that does not load (a Hub id not reachable), a tokenizer without a chat template, a drafter built for
    another target or more early-exit layers than the target has failed raw, the static path's only after its
    verification timings and compiling; they fail right after loading, in one line naming the option."""
    from hf_adaptive_spec.profiling import cli

    folder = tmp_path / "model"
    _saved_tiny_model(folder)
    argv = ["--model", str(folder), "--json", str(tmp_path / "p.json"), "--static", "--verify-tokens", "1,4",
            "--repeats", "1", "--context-length", "16", "--drafter-layers", "2"]
    if case == "no chat template":
        (folder / "chat_template.jinja").unlink()
    elif case == "too many layers":
        argv.remove("--drafter-layers")
        argv.remove("2")
    elif case == "another target's drafter":
        argv += ["--eagle3", str(shipped_checkpoint("eagle3"))]
    else:
        argv[1] = "org/model"

        def unreachable(name, dtype, needed_for):
            raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")
        monkeypatch.setattr(default_model, "load_chat_model", unreachable)
    for timing in ("measure_static_verification", "measure_in_generate"):
        monkeypatch.setattr(cli, timing, lambda *args, **kwargs: pytest.fail("timed before the checks"))
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_buckets_too_small_for_a_later_draft_level_are_refused_before_any_timing(capsys):
    """The profile times a draft level after the first on two-level trees (3 tokens): a largest bucket of 2 capped
    them to one level and failed after the timings, asking for more max_new_tokens."""
    from hf_adaptive_spec.profiling import cli

    with pytest.raises(SystemExit):
        cli.main(["--model", "/nonexistent-model-folder", "--static", "--buckets", "2"])
    assert "--buckets 2: the largest bucket must be at least 3" in capsys.readouterr().err


def test_rerank_without_lookup_tokens_ranks_the_branch_lengths_the_profile_was_ranked_with(tmp_path, capsys):
    """``profile --rerank`` without ``--lookup-tokens`` ranked without the prompt-lookup branch, dropping one the
    profile was ranked (and recommended) with: it ranks the lengths the profile holds, and says so."""
    from hf_adaptive_spec.environments import record_replay
    from hf_adaptive_spec.policies.base import TreeConfig
    from hf_adaptive_spec.profiling import cli

    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    folder = tmp_path / "recording"
    record_replay(model, drafter, [prompt(9, seed=5)], TreeConfig(depth=3, top_k=2, total_tokens=8), 12).save(folder)
    path = tmp_path / "profile.json"
    HardwareProfile("cpu", "float32", 1, 16, [1, 4, 8, 10], [1.0, 1.1, 1.3, 1.35], draft_step_seconds=0.05,
                    policy_call_seconds=0.0, catch_up_tokens=[1], catch_up_seconds=[0.05], model="org/tiny",
                    drafter="early exit: 2 layers").save(path)
    rerank = ["--rerank", "--json", str(path), "--recording", str(folder)]
    assert cli.main([*rerank, "--lookup-tokens", "0,2"]) == 0
    assert HardwareProfile.load(path).recommendation["lookup_counts"] == [0, 2]
    capsys.readouterr()
    assert cli.main(rerank) == 0
    assert HardwareProfile.load(path).recommendation["lookup_counts"] == [0, 2]
    assert "with the prompt-lookup branch lengths [0, 2] it was ranked with" in capsys.readouterr().out
    edited = json.loads(path.read_text(encoding="utf-8"))
    edited["recommendation"]["lookup_counts"] = [0, -2]
    path.write_text(json.dumps(edited), encoding="utf-8")
    with pytest.raises(SystemExit):
        cli.main(rerank)
    assert "its recommendation's lookup_counts are not such" in capsys.readouterr().err


def test_a_cpu_profile_timed_with_other_threads_than_this_process_runs_is_warned_of(tmp_path):
    """What a many-token verification costs against one token depends on the CPU threads: a profile timed with others
    than this process runs is warned of, naming both counts and the fix, once per call; a GPU's profile is not."""
    import warnings

    tree = {"depth": 2, "top_k": 2, "total_tokens": 4, "tau": 2.0, "tokens_per_second": 10.0}
    threads = torch.get_num_threads()
    other = HardwareProfile("cpu", "float32", threads + 1, 64, [1, 4], [1.0, 1.2],
                            recommendation={"tree": tree, "policy": None})
    other.save(tmp_path / "other.json")
    for recommended in (hfas.recommended_generate_kwargs, hfas.recommended_policy, recommended_tree):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            recommended(tmp_path / "other.json", model=tiny_model("llama"))
        assert [str(warning.message) for warning in caught] == [
            f"The hardware profile {tmp_path / 'other.json'} was timed with {threads + 1} CPU threads and this process "
            f"runs {threads} (torch.get_num_threads()): what a verification of many tokens costs against one token "
            "depends on the threads, so its recommendation may not be this process's best. Call "
            f"torch.set_num_threads({threads + 1}) before generating, or profile with `hf-adaptive-spec profile "
            f"--num-threads {threads} --recording DIR`."]
        assert caught[0].filename == __file__  # pointing at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hfas.recommended_generate_kwargs(HardwareProfile("cpu", "float32", threads, 64, [1, 4], [1.0, 1.2],
                                                         recommendation={"tree": tree, "policy": None}))
        hfas.recommended_generate_kwargs(HardwareProfile("cuda", "float32", threads + 1, 64, [1, 4], [1.0, 1.2],
                                                         recommendation={"tree": tree, "policy": None}))
