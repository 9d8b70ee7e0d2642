"""A policy's settings are checked whenever it runs or is saved, not only when it is built: a setting changed since
(``policy.threshold = 5.0``) is refused by ``generate`` before the call touches any state, by a replay and by
``save_pretrained`` (whose ``config.json`` loading would refuse). On/off settings take True or False alone (the
string "no" would count as true), numbers are never NaN, and a network layer has a width."""

from __future__ import annotations

import json
import math

import pytest
import torch
from tiny_models import SMALL_LTD, prompt, tiny_eagle3, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.policies import AutoDraftPolicy

RESPS = dict(hidden_size=16, num_target_layers=4, net_arch=(8,))

# (policy factory, the setting changed after construction, the error's words)
CHANGED_SINCE = [
    (lambda: hfas.ConfidenceThresholdPolicy(depth=3), "threshold", 5.0, "threshold must be a number >= 0.0"),
    (lambda: hfas.ConfidenceThresholdPolicy(depth=3), "adaptive", "no", "adaptive must be True or False"),
    (lambda: hfas.ConfidenceThresholdPolicy(depth=3), "threshold", math.nan, "not NaN"),
    (lambda: hfas.HeuristicLengthPolicy(2, 8), "depth", 0, "1 <= depth <= max_depth"),
    (lambda: hfas.HeuristicLengthPolicy(2, 8), "max_depth", 1, "initial_depth <= max_depth"),
    (lambda: hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, lstm_hidden=8, mlp_hidden=8), "min_score", 5.0,
     "min_score must be a number > -inf and < 0"),
    (lambda: hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, lstm_hidden=8, mlp_hidden=8), "lookup_first", "no",
     "lookup_first must be True or False"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "temperature", -1.0, "temperature must be a number >= 0"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "decision_interval", 0, "decision_interval must be an int >= 1"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "decision_interval", 2.5, "decision_interval must be an int >= 1"),
    (lambda: hfas.LTDPolicy(**SMALL_LTD), "context_scale", 0.0, "context_scale must be a number > 0 and < inf"),
    (lambda: hfas.LTDPolicy(**SMALL_LTD), "lookup_feature", True, "heads read observations of"),
]
IDS = [f"{make().__class__.__name__}.{name}={value!r}" for make, name, value, _ in CHANGED_SINCE]


@pytest.fixture(scope="module")
def models():
    target = tiny_model("llama")
    return target, tiny_eagle3(target)


@pytest.mark.parametrize("make, name, value, message", CHANGED_SINCE, ids=IDS)
def test_a_setting_changed_since_construction_is_refused_by_generate_before_any_state(models, make, name, value,
                                                                                      message):
    target, drafter = models
    policy = make()
    setattr(policy, name, value)
    begun = []
    policy.begin_generation = lambda: begun.append(True)  # the refusal comes before the call's first policy hook
    with pytest.raises(ValueError, match=message):
        target.generate(prompt(6), max_new_tokens=4, do_sample=False, assistant_model=drafter, assistant_policy=policy)
    assert not begun


@pytest.mark.parametrize("make, name, value, message", CHANGED_SINCE, ids=IDS)
def test_a_setting_changed_since_construction_is_refused_on_saving(tmp_path, make, name, value, message):
    policy = make()
    setattr(policy, name, value)
    with pytest.raises(ValueError, match=message):
        policy.save_pretrained(tmp_path / "policy")
    assert not (tmp_path / "policy").exists()


def test_a_replay_refuses_a_setting_changed_since_construction():
    from hf_adaptive_spec.environments.replay import ReplayLoop

    class _NoCycles(ReplayLoop):
        num_prompts = 1

        def num_positions(self, prompt: int) -> int:
            return 0

    policy = hfas.ConfidenceThresholdPolicy(depth=3)
    assert _NoCycles().replay_prompt(0, policy) == []
    policy.threshold = 5.0
    with pytest.raises(ValueError, match="threshold must be a number >= 0.0"):
        _NoCycles().replay_prompt(0, policy)


def test_a_static_trees_fields_set_the_tree_it_drafts(models):
    target, drafter = models
    policy = hfas.StaticTreePolicy(depth=3, top_k=2, total_tokens=6)
    policy.top_k, policy.depth = 1, 2
    assert policy.config == hfas.TreeConfig(depth=2, top_k=1, total_tokens=6)
    assert (policy.depth, policy.top_k, policy.total_tokens, policy.sample_drafts) == (2, 1, 6, False)
    out = target.generate(prompt(6), max_new_tokens=6, do_sample=False, assistant_model=drafter,
                          assistant_policy=policy, return_dict_in_generate=True)
    assert max(out.speculation.draft_depths) <= 2
    with pytest.raises(ValueError, match="StaticTreePolicy: top_k must be an int >= 1, got -1"):
        policy.top_k = -1
    assert policy.config.top_k == 1
    with pytest.raises(ValueError, match="^ConfidenceThresholdPolicy: depth must be an int >= 0, got True"):
        hfas.ConfidenceThresholdPolicy(depth=True)  # named TreeConfig.depth, which the caller never wrote
    with pytest.raises(ValueError, match="^LTDPolicy: total_tokens must be an int >= 1, got 0"):
        hfas.LTDPolicy(total_tokens=0)
    with pytest.raises(ValueError, match="^StaticTreePolicy: sample_drafts must be True or False"):
        hfas.StaticTreePolicy(sample_drafts="yes")
    threshold = hfas.ConfidenceThresholdPolicy(depth=3)
    threshold.depth = 5
    assert threshold.config == hfas.TreeConfig(depth=5, top_k=1, total_tokens=6)


@pytest.mark.parametrize("make, name, value, message", [
    (lambda: hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, lstm_hidden=8, mlp_hidden=8), "top_k", 3,
     "network reads top_k=2"),
    (lambda: hfas.LTDPolicy(**SMALL_LTD), "depth", 3, "heads read observations of"),
], ids=["radar-top_k", "ltd-depth"])
def test_a_tree_field_the_network_does_not_read_is_refused_when_set_and_the_tree_kept(make, name, value, message):
    policy = make()
    tree = policy.tree
    with pytest.raises(ValueError, match=message):
        setattr(policy, name, value)
    assert policy.tree is tree


@pytest.mark.parametrize("build, message", [
    (lambda: hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=4, sample_drafts="no"), "sample_drafts must be"),
    (lambda: hfas.TreeConfig(depth=2, top_k=2, total_tokens=4, sample_drafts=1), "sample_drafts must be"),
    (lambda: hfas.ConfidenceThresholdPolicy(adaptive="no"), "adaptive must be True or False"),
    (lambda: hfas.ConfidenceThresholdPolicy(threshold=True), "threshold must be a number"),
    (lambda: hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, allow_skip="no"), "allow_skip must be True or False"),
    (lambda: hfas.LTDPolicy(**SMALL_LTD, lookup_first="false"), "lookup_first must be True or False"),
    (lambda: hfas.ReSpSPolicy(**RESPS, lookup_first="no"), "lookup_first must be True or False"),
    (lambda: hfas.DVIDrafter(tiny_model("llama"), exit_layer=2, share_cache="no"), "share_cache must be True or"),
], ids=["static", "tree", "threshold-adaptive", "threshold-bool", "radar", "ltd", "resps", "dvi"])
def test_an_on_off_setting_takes_a_bool_alone(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_an_on_off_setting_written_as_a_string_in_config_json_is_refused_on_loading(tmp_path):
    hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=4).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "sample_drafts": "false"}))
    with pytest.raises(ValueError, match="sample_drafts must be True or False, got 'false'"):
        AutoDraftPolicy.from_pretrained(tmp_path)


@pytest.mark.parametrize("build, message", [
    (lambda: hfas.ReSpSPolicy(**{**RESPS, "net_arch": (0,)}), "each width of net_arch must be an int >= 1"),
    (lambda: hfas.ReSpSPolicy(**{**RESPS, "net_arch": (6.9,)}), "each width of net_arch must be an int >= 1"),
    (lambda: hfas.LTDPolicy(**{**SMALL_LTD, "depth_actor": (0,)}), "each width of depth_actor must be an int >= 1"),
    (lambda: hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, mlp_hidden=0), "mlp_hidden must be an int >= 1"),
    (lambda: hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, dropout=math.nan), "dropout must be a number"),
    (lambda: hfas.ReSpSPolicy(**RESPS, actions=[(6.9, 3.9, 2.9)]), "TreeConfig.depth must be an int"),
    (lambda: hfas.ReSpSPolicy(**RESPS, feature_layers=[]), "feature_layers must be one or more ints"),
    (lambda: hfas.ReSpSPolicy(hidden_size=16, num_target_layers=0, net_arch=(8,)), "feature_layers must be one or"),
    # a config.json's number or null where a list belongs: a bare TypeError or unpacking error before
    (lambda: hfas.LTDPolicy(**{**SMALL_LTD, "depth_actor": 8}), "LTDPolicy: depth_actor must be a list of hidden"),
    (lambda: hfas.ReSpSPolicy(**{**RESPS, "net_arch": None}), "ReSpSPolicy: net_arch must be a list of hidden"),
    (lambda: hfas.ReSpSPolicy(**RESPS, actions=[[1, 0]]), r"actions must be a list of \(total_tokens, depth, top_k\)"),
], ids=["resps-zero-width", "resps-float-width", "ltd-zero-width", "radar-zero-width", "radar-nan-dropout",
        "resps-float-action", "resps-no-layers", "resps-no-target-layers", "ltd-width-not-a-list",
        "resps-widths-null", "resps-action-pair"])
def test_a_network_or_grid_setting_that_would_be_rounded_or_empty_is_refused(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_numpy_integers_are_taken_as_ints():
    policy = hfas.ReSpSPolicy(hidden_size=16, feature_layers=torch.tensor([1, 2]).numpy(), net_arch=(8,))
    assert policy.feature_layers == (1, 2) and all(type(i) is int for i in policy.feature_layers)
