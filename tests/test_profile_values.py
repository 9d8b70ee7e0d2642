"""A hardware profile holds what a measurement gives, or is refused naming what is wrong and the fix: no size,
setting, bucket, key or recommendation that a replay or ``generate`` would read silently wrong (or crash on later)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hf_adaptive_spec as hfas
from hf_adaptive_spec.profiling import HardwareProfile

ROOT = Path(__file__).resolve().parents[1]
MEASURED = dict(device="cpu", dtype="float32", num_threads=1, context_length=64, verify_tokens=[1, 4, 8],
                verify_seconds=[0.1, 0.15, 0.2], draft_step_seconds=0.01)
TREE = {"depth": 2, "top_k": 2, "total_tokens": 4, "tau": 2.0, "tokens_per_second": 10.0}


def profile(**changes) -> HardwareProfile:
    return HardwareProfile(**{**MEASURED, **changes})


@pytest.mark.parametrize(("sizes", "message"), [
    ([], "verify_tokens is empty or missing"),
    ([0, 4], r"verify_tokens must be an int >= 1 .*got 0\. .*hf-adaptive-spec profile"),
    ([-3, 4], r"verify_tokens must be an int >= 1 .*got -3"),
    ([1.5, 4], r"verify_tokens must be an int >= 1 .*got 1\.5"),
])
def test_verification_sizes_no_measurement_times_are_refused(sizes, message):
    """A profile with no size crashed the replay later (IndexError), and a point at 0, below 0 or between two
    sizes priced a plain step (1 token) by interpolating from a tree no measurement has."""
    with pytest.raises(ValueError, match=message):
        profile(verify_tokens=sizes, verify_seconds=[1.0, 2.0][:len(sizes)])


def test_buckets_are_distinct_sizes_of_the_static_path():
    """A bucket given twice had its second time ignored; a bucket of 0 was read as one; buckets on the eager path,
    which pads no tree, made a replay pad and cap trees as generate never does there."""
    static = dict(path="compiled", verify_tokens=[1, 8], verify_seconds=[0.1, 0.2])
    with pytest.raises(ValueError, match=r"buckets \[8, 8\] measures a size twice: give each size once"):
        profile(**static, buckets=[8, 8], bucket_seconds=[0.2, 9.0])
    with pytest.raises(ValueError, match=r"buckets must be an int >= 1 .*got 0"):
        profile(**static, buckets=[0, 8])
    with pytest.raises(ValueError, match=r"buckets \[4, 8\] on the eager path.*set path to 'static' or 'compiled'.*"
                                         r"else set buckets and bucket_seconds to None"):
        profile(buckets=[4, 8])
    assert profile(path="static", buckets=[4, 8]).verify_time(3) == 0.15


@pytest.mark.parametrize(("changes", "message"), [
    ({"path": "Eager"}, r"path is 'Eager': it must be one of \('eager', 'static', 'compiled'\)"),
    ({"num_threads": 0}, r"num_threads must be an int >= 1, got 0\. .*hf-adaptive-spec profile"),
    ({"context_length": -5}, r"context_length must be an int >= 0, got -5"),
    ({"cache_slots": 0, "path": "compiled"}, r"cache_slots must be an int >= 1, got 0"),
    ({"draft_step_seconds": "0.1"}, r"draft_step_seconds is 0\.1: it must be a finite number of seconds >= 0"),
    ({"catch_up_tokens": [-5.0, 2.0], "catch_up_seconds": [0.1, 0.2]}, r"the counts distinct, ascending and >= 1"),
])
def test_settings_no_measurement_has_are_refused_on_construction(changes, message):
    """A path typo failed only once a curve was taken; no thread, a negative context or cache, a draft step in
    text or a catch-up count below one token were taken as measured."""
    with pytest.raises(ValueError, match=message):
        profile(**changes)
    assert profile(context_length=0).context_length == 0  # fitted over a run's contexts (profile_from_bench)


@pytest.mark.parametrize(("changes", "message"), [
    ({"dtype": "fp32"}, r"dtype is 'fp32', not a torch dtype's name: write .*'float32'"),
    ({"dtype": "float"}, r"dtype is 'float', not a torch dtype's name"),
    ({"device": "gpu0"}, r"device is 'gpu0', which torch does not name: write .*'cuda:0'"),
])
def test_a_device_or_dtype_torch_does_not_name_is_refused_with_its_curve_and_on_load(tmp_path, changes, message):
    """``dtype="fp32"`` made the curve cpu/fp32/eager, which fits no policy and no model, without a word."""
    typo = profile(**changes)
    with pytest.raises(ValueError, match=message):
        typo.cost_curve()
    typo.save(tmp_path / "p.json")
    with pytest.raises(ValueError, match=f"The hardware profile {tmp_path / 'p.json'}: {message}"):
        HardwareProfile.load(tmp_path / "p.json")
    assert str(profile(device="cuda:0").cost_curve()).startswith("cuda/float32/eager")


def test_a_profile_that_cannot_price_a_draft_level_says_so():
    """Without a draft step time a drafting cycle has no price: it was a TypeError on None."""
    catch_up_only = profile(draft_step_seconds=None, catch_up_tokens=[1.0, 8.0], catch_up_seconds=[0.01, 0.02])
    assert catch_up_only.draft_time(0) == 0.0
    with pytest.raises(ValueError, match=r"no draft_step_seconds: it cannot price a drafting cycle \(2 levels here\).*"
                                         "hf-adaptive-spec profile"):
        catch_up_only.draft_time(2)
    with pytest.raises(ValueError, match=r"no draft_step_seconds: it cannot price a drafting cycle \(1 levels here\)"):
        profile(draft_step_seconds=None).draft_time(1)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda values: {**values, "new_field": 1}, r"it has keys no profile has: \['new_field'\]"),
    (lambda values: {key: value for key, value in values.items() if key != "device"},
     r"it lacks the required keys \['device'\]"),
    (lambda values: list(values), "it holds a JSON list, not an object of a profile's keys"),
])
def test_load_names_the_file_and_the_keys_it_cannot_read(tmp_path, edit, message):
    """A key of another version or an edit was a TypeError on HardwareProfile.__init__, naming no file."""
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(edit(json.loads(json.dumps(MEASURED)))))
    with pytest.raises(ValueError, match=f"The hardware profile {path}: {message}.*another version of hf-adaptive-spec "
                                         "or edited: measure the machine again with `hf-adaptive-spec profile`"):
        HardwareProfile.load(path)


@pytest.mark.parametrize("edit", [{"verify_tokens": None}, {"verify_seconds": None},
                                  {"catch_up_tokens": ["1", "2"], "catch_up_seconds": [0.01, 0.02]}])
def test_load_refuses_a_value_of_the_wrong_json_type_naming_the_file(tmp_path, edit):
    """null or text where a list of numbers was measured was a bare TypeError naming neither the file nor the fix."""
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({**json.loads(json.dumps(MEASURED)), **edit}))
    with pytest.raises(ValueError, match=f"The hardware profile {path} holds a value of the wrong type .*measure the "
                                         "machine again with `hf-adaptive-spec profile`"):
        HardwareProfile.load(path)


@pytest.mark.parametrize(("recommendation", "message"), [
    ({"policy": None, "tree": {}}, r"TreeConfig.depth must be an int >= 0, got None"),
    ({"policy": None}, "it must be an object whose tree has depth, top_k and total_tokens"),
    ({"policy": None, "tree": TREE, "lookup_tokens": -2}, r"lookup_tokens must be an int >= 0 .*got -2"),
    ({"policy": None, "tree": TREE, "lookup_tokens": "x"}, r"lookup_tokens must be an int >= 0 .*got 'x'"),
    ({"policy": None, "tree": {**TREE, "lookup_first": "no"}}, "lookup_first must be True or False"),
    ({"policy": 3, "tree": TREE}, "its policy must be a shipped policy's name or None, got 3"),
])
def test_a_malformed_recommendation_is_refused_naming_the_profile_and_the_fix(tmp_path, recommendation, message):
    """A tree of no depth was a KeyError, and a branch of -2 tokens came back as prompt_lookup_num_tokens=-2."""
    path = tmp_path / "profile.json"
    profile(recommendation=recommendation).save(path)
    for recommended in (hfas.recommended_generate_kwargs, hfas.recommended_policy, hfas.profiling.recommended_tree,
                        hfas.recommended_lookup_tokens):
        with pytest.raises(ValueError, match=f"The hardware profile {path} holds a recommendation its ranking does "
                                             f"not write: .*{message}.*profile --rerank --json FILE --recording DIR"):
            recommended(path)


def test_every_profile_in_the_repository_still_loads_with_its_recommendation():
    """The measured profiles the results and artifacts keep, of every format since the first, pass the checks."""
    from hf_adaptive_spec.profiling.recommendation import _check_recommendation

    paths = [path for folder in ("results", "artifacts") for path in sorted((ROOT / folder).rglob("profile*.json"))]
    profiles = [path for path in paths if "verify_seconds" in json.loads(path.read_text(encoding="utf-8"))]
    assert len(profiles) >= 30
    for path in profiles:
        loaded = HardwareProfile.load(path)
        if loaded.recommendation:
            _check_recommendation(loaded, str(path))
