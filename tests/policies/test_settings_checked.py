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
    # a learned policy's tree that samples its drafts: generate drafted sampled trees, save_pretrained dropped it
    (lambda: hfas.LTDPolicy(**SMALL_LTD), "tree", hfas.TreeConfig(2, 2, 4, sample_drafts=True),
     "LTDPolicy decides for top-k trees"),
    (lambda: hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, lstm_hidden=8, mlp_hidden=8), "tree",
     hfas.TreeConfig(3, 2, 6, sample_drafts=True), "RadarPolicy decides for top-k trees"),
    (lambda: hfas.ReSpSPolicy(**RESPS, actions=[(4, 2, 2)]), "actions", [hfas.TreeConfig(2, 2, 4, sample_drafts=True)],
     "ReSpSPolicy decides for top-k trees"),
    # a tree that is no TreeConfig: an AttributeError inside generate
    (lambda: hfas.LTDPolicy(**SMALL_LTD), "tree", "x",
     r"LTDPolicy.tree must be a TreeConfig, got 'x': set policy.tree = TreeConfig"),
    (lambda: hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, lstm_hidden=8, mlp_hidden=8), "tree", "x",
     "RadarPolicy.tree must be a TreeConfig"),
    (lambda: hfas.ConfidenceThresholdPolicy(depth=3), "config", "x", "ConfidenceThresholdPolicy.config must be a Tree"),
    # a confidence policy's tree that is no chain: generate verified 10-token trees, its saved copy 3-token chains
    (lambda: hfas.ConfidenceThresholdPolicy(depth=3), "config", hfas.TreeConfig(depth=3, top_k=4, total_tokens=10),
     r"drafts a chain, as transformers' assistant does: its config must be TreeConfig\(depth=d, top_k=1"),
    (lambda: hfas.ConfidenceThresholdPolicy(depth=3), "config", hfas.TreeConfig(depth=3, top_k=1, total_tokens=9),
     "drafts a chain"),
    (lambda: hfas.HeuristicLengthPolicy(2, 8), "initial_depth", 99, "1 <= initial_depth <= max_depth"),
    # Re-SpS settings its networks no longer fit: an IndexError inside generate, or a folder that cannot be loaded
    (lambda: hfas.ReSpSPolicy(**RESPS), "actions", [(4, 2, 2)], "actor has 53 outputs, one per action, but actions"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "feature_layers", (1, 2), "networks read 48 features, but feature_layers"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "feature_layers", 3, "feature_layers must be a list of indices"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "hidden_size", 8, "networks read 48 features"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "hidden_size", 16.0, "hidden_size must be an int >= 1"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "net_arch", (16,), r"hidden widths \[8\], but net_arch is \[16\]"),
    # the training record in config.json's form, or a length no branch has: a bare AttributeError once the output was
    # decoded (the output lost), or a report asking for prompt_lookup_num_tokens=-2
    (lambda: hfas.LTDPolicy(**SMALL_LTD), "trained_on", {"device": "cpu", "dtype": "float32", "path": "eager"},
     r"LTDPolicy: trained_on must be a CostCurve or None, got .* CostCurve.from_config"),
    (lambda: hfas.StaticTreePolicy(2, 2, 4), "trained_on", {"device": "cpu", "dtype": "float32", "path": "eager"},
     "trained_on must be a CostCurve"),
    (lambda: hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, lstm_hidden=8, mlp_hidden=8), "trained_for_drafter",
     {"name": "org/x", "weights": "ab" * 16}, "trained_for_drafter must be a DrafterIdentity or None"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "trained_with_lookup_tokens", -2,
     "trained_with_lookup_tokens must be an int >= 0"),
    (lambda: hfas.StaticTreePolicy(2, 2, 4), "trained_with_lookup_tokens", True, "trained_with_lookup_tokens must be"),
    (lambda: hfas.HeuristicLengthPolicy(2, 8), "trained_with_lookup_ngram_size", 0,
     "trained_with_lookup_ngram_size must be an int >= 1"),
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
    (lambda: hfas.ReSpSPolicy(hidden_size=16, num_target_layers=0, net_arch=(8,)), "num_target_layers must be an int"),
    # a config.json's number or null where a list belongs: a bare TypeError or unpacking error before
    (lambda: hfas.LTDPolicy(**{**SMALL_LTD, "depth_actor": 8}), "LTDPolicy: depth_actor must be a list of hidden"),
    (lambda: hfas.ReSpSPolicy(**{**RESPS, "net_arch": None}), "ReSpSPolicy: net_arch must be a list of hidden"),
    (lambda: hfas.ReSpSPolicy(**RESPS, actions=[[1, 0]]), r"actions must be a list of \(total_tokens, depth, top_k\)"),
    (lambda: hfas.ReSpSPolicy(**RESPS, actions="abc"), r"actions must be a list of \(total_tokens, depth, top_k\)"),
    # a bare TypeError from plain_ints, a tensor of negative size, None * 3, or True read as 1
    (lambda: hfas.LTDPolicy(**{**SMALL_LTD, "size_choices": 3}), "LTDPolicy: size_choices must be a list of verif"),
    (lambda: hfas.ReSpSPolicy(**{**RESPS, "feature_layers": 3}), "ReSpSPolicy: feature_layers must be a list of"),
    *[(lambda bad=bad: hfas.ReSpSPolicy(**{**RESPS, "hidden_size": bad}), "ReSpSPolicy: hidden_size must be an int")
      for bad in (-1, 16.0, "64", None, True)],
    (lambda: hfas.ReSpSPolicy(hidden_size=16, num_target_layers=True, net_arch=(8,)), "num_target_layers must be an"),
    # a tree of one level leaves RADAR no decision: refused at depth 1, not at depth 3 with 2 tokens (also one level)
    *[(lambda depth=depth, total=total: hfas.RadarPolicy(depth=depth, top_k=2, total_tokens=total),
       r"RadarPolicy decides after each draft step but the last.*reaching depth 1\): a StaticTreePolicy")
      for depth, total in ((1, 3), (3, 2))],
], ids=["resps-zero-width", "resps-float-width", "ltd-zero-width", "radar-zero-width", "radar-nan-dropout",
        "resps-float-action", "resps-no-layers", "resps-no-target-layers", "ltd-width-not-a-list",
        "resps-widths-null", "resps-action-pair", "resps-actions-text", "ltd-choices-not-a-list",
        "resps-layers-not-a-list", "resps-hidden-negative", "resps-hidden-float", "resps-hidden-text",
        "resps-hidden-null", "resps-hidden-bool", "resps-target-layers-bool", "radar-depth-1", "radar-two-tokens"])
def test_a_network_or_grid_setting_that_would_be_rounded_or_empty_is_refused(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize("make, key, value, message", [
    (lambda: hfas.LTDPolicy(**SMALL_LTD), "size_choices", 3, "LTDPolicy: size_choices must be a list of"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "hidden_size", "16", "ReSpSPolicy: hidden_size must be an int >= 1"),
    (lambda: hfas.ReSpSPolicy(**RESPS), "feature_layers", 2, "ReSpSPolicy: feature_layers must be a list of"),
], ids=["ltd-size_choices", "resps-hidden_size", "resps-feature_layers"])
def test_a_config_json_value_of_the_wrong_kind_is_refused_by_name_on_loading(tmp_path, make, key, value, message):
    make().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, key: value}))
    with pytest.raises(ValueError, match=message):
        AutoDraftPolicy.from_pretrained(tmp_path)


def test_ltd_size_choices_set_to_a_number_are_refused_and_the_choices_kept():
    policy = hfas.LTDPolicy(**SMALL_LTD)
    with pytest.raises(ValueError, match=r"LTDPolicy: size_choices must be a list of .* got 3\."):
        policy.size_choices = 3
    assert policy.size_choices == [1, 2, 3]


def test_mark_trained_on_refuses_the_config_json_form_of_the_record():
    """The engine compares the record with each call's once the output is decoded: a dict there failed as a bare
    AttributeError, the output lost."""
    policy = hfas.LTDPolicy(**SMALL_LTD)
    with pytest.raises(ValueError, match=r"trained_on must be a CostCurve or None, got \{'device'"):
        policy.mark_trained_on({"device": "cpu", "dtype": "float32", "path": "eager"})
    with pytest.raises(ValueError, match="trained_for_drafter must be a DrafterIdentity"):
        policy.mark_trained_on(None, {"name": "org/x", "weights": "ab" * 16})
    assert policy.trained_on is None and policy.trained_for_drafter is None


def test_numpy_integers_are_taken_as_ints():
    policy = hfas.ReSpSPolicy(hidden_size=16, feature_layers=torch.tensor([1, 2]).numpy(), net_arch=(8,))
    assert policy.feature_layers == (1, 2) and all(type(i) is int for i in policy.feature_layers)
