"""``save_pretrained`` writes a policy as it is now: settings changed after construction, what the
heuristics adapted, the curve it was trained on, and the dtype of its weights all come back."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tiny_models import SMALL_LTD, prompt

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core.cost_curve import CostCurve
from hf_adaptive_spec.core.drafter_identity import DrafterIdentity
from hf_adaptive_spec.policies import (
    AutoDraftPolicy,
    ConfidenceThresholdPolicy,
    HeuristicLengthPolicy,
    LTDPolicy,
    RadarPolicy,
    ReSpSPolicy,
    StaticTreePolicy,
)
from hf_adaptive_spec.policies.base import CycleState, TreeConfig, VerifySizeInfo

COMPILED = CostCurve("cpu", "bfloat16", "compiled")


def reloaded(policy, folder):
    policy.save_pretrained(folder)
    return AutoDraftPolicy.from_pretrained(folder)


def test_a_replaced_static_tree_is_saved(tmp_path):
    policy = StaticTreePolicy(depth=4, top_k=2, total_tokens=8)
    policy.config = TreeConfig(depth=3, top_k=1, total_tokens=4, sample_drafts=True)
    assert reloaded(policy, tmp_path).config == policy.config


def test_what_the_heuristics_adapted_is_saved(tmp_path):
    threshold = ConfidenceThresholdPolicy(depth=6, threshold=0.4)
    threshold.threshold, threshold.adaptive = 0.27, False  # a user's settings (observe() adapts current_threshold)
    again = reloaded(threshold, tmp_path / "threshold")
    assert (again.threshold, again.adaptive, again.config.depth) == (0.27, False, 6)

    length = HeuristicLengthPolicy(initial_depth=5, max_depth=12)
    length.depth = 9  # after cycles that accepted every drafted token
    again = reloaded(length, tmp_path / "length")
    assert (again.depth, again.max_depth) == (9, 12)


def test_resps_settings_set_after_construction_are_saved(tmp_path):
    policy = ReSpSPolicy(hidden_size=8, num_target_layers=4, feature_layers=(1, 2), actions=[(4, 2, 2), (6, 3, 2)])
    policy.temperature, policy.decision_interval, policy.training_interval = 1.5, 7, 3
    policy.observation_clip, policy.trained_on = 4.0, COMPILED
    again = reloaded(policy, tmp_path)
    settings = ("temperature", "decision_interval", "training_interval", "observation_clip", "trained_on")
    assert [getattr(again, name) for name in settings] == [1.5, 7, 3, 4.0, COMPILED]


def test_resps_actions_set_after_construction_are_its_grid_and_saved(tmp_path):
    """Set as (total_tokens, depth, top_k) triples, as the constructor takes them, the grid is held as trees: the
    triples were kept as they were, and save_pretrained failed on them with a bare AttributeError."""
    policy = ReSpSPolicy(hidden_size=8, num_target_layers=4, feature_layers=(1, 2), actions=[(4, 2, 2), (6, 3, 2)])
    policy.actions = [(8, 3, 2), (6, 2, 3)]  # as many: the actor's outputs fit
    grid = (TreeConfig(depth=3, top_k=2, total_tokens=8), TreeConfig(depth=2, top_k=3, total_tokens=6))
    assert policy.actions == grid
    assert reloaded(policy, tmp_path).actions == grid
    policy.actions = policy.actions[::-1]  # the trees it holds, too
    assert reloaded(policy, tmp_path / "reversed").actions == grid[::-1]


def test_ltd_and_radar_trees_and_scales_set_after_construction_are_saved(tmp_path):
    ltd = LTDPolicy(depth=3, top_k=2, total_tokens=6, depth_actor=(8,), depth_critic=(8,), size_actor=(8,),
                    size_critic=(8,))
    ltd.context_scale, ltd.trained_on = 250.0, COMPILED
    again = reloaded(ltd, tmp_path / "ltd")
    assert (again.context_scale, again.trained_on, again.tree) == (250.0, COMPILED, ltd.tree)

    radar = RadarPolicy(depth=4, top_k=2, total_tokens=8, lstm_hidden=8, mlp_hidden=8)
    radar.tree, radar.min_score = TreeConfig(depth=6, top_k=2, total_tokens=12), -12.0
    radar.mlp[2].p = 0.3  # the dropout a further training run uses (saved as built before)
    again = reloaded(radar, tmp_path / "radar")
    assert (again.tree, again.min_score, again.mlp[2].p) == (radar.tree, -12.0, 0.3)


def test_ltd_size_choices_set_after_construction_are_the_ones_it_decides_with(tmp_path):
    """save_pretrained writes size_choices as the policy holds them; the live policy masked its decisions with the
    ones it was built with, so it verified 2 candidates where its saved copy verifies 3."""
    policy = LTDPolicy(**{**SMALL_LTD, "depth": 3, "total_tokens": 9, "size_choices": [1, 2, 4, 8]})
    with torch.no_grad():
        policy.size_head.actor[-1].bias.copy_(torch.tensor([0.0, 0.0, 0.0, 50.0]))  # the last choice, where allowed
    policy.size_choices = [0, 1, 2, 3]  # as many: the weights fit
    info = VerifySizeInfo(context_length=10, scores=torch.log(torch.tensor([0.5, 0.4, 0.3])),
                          depths=torch.tensor([1, 1, 2]), config=policy.tree)
    assert policy.num_tokens_to_verify(info) == reloaded(policy, tmp_path).num_tokens_to_verify(info) == 3
    policy.train()
    policy.generator = torch.Generator().manual_seed(0)
    policy.num_tokens_to_verify(info)
    assert policy.decisions[-1].action_mask.tolist() == [True] * 4  # training masks with them too
    with pytest.raises(ValueError, match="the size head has 4 outputs, one per choice, got 2 size_choices"):
        policy.size_choices = [0, 5]
    with pytest.raises(ValueError, match="size_choices must be strictly increasing"):
        policy.size_choices = [3, 2, 1, 0]


def test_a_changed_setting_that_no_longer_fits_the_weights_is_refused_on_saving_and_on_loading(tmp_path):
    policy = RadarPolicy(depth=4, top_k=2, total_tokens=8, lstm_hidden=8, mlp_hidden=8)
    policy.save_pretrained(tmp_path)
    policy.tree = TreeConfig(depth=4, top_k=3, total_tokens=8)  # top_k is the network's input size
    with pytest.raises(ValueError, match="network reads top_k=2 beam scores .* keep the shape it was built with"):
        policy.save_pretrained(tmp_path / "changed")
    assert not (tmp_path / "changed").exists()
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "top_k": 3}))  # the same change, made in the file
    with pytest.raises(Exception, match="does not fit|does not match"):
        AutoDraftPolicy.from_pretrained(tmp_path)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_policy_comes_back_in_its_dtype_with_its_weights(tmp_path, dtype):
    policy = RadarPolicy(depth=4, top_k=2, total_tokens=8, lstm_hidden=8, mlp_hidden=8).to(dtype)
    again = reloaded(policy, tmp_path)
    assert {p.dtype for p in again.parameters()} == {dtype}
    for (name, mine), theirs in zip(policy.state_dict().items(), again.state_dict().values()):
        assert torch.equal(mine, theirs), name


def test_a_float32_policy_stays_float32(tmp_path):
    policy = ReSpSPolicy(hidden_size=8, num_target_layers=4, feature_layers=(1, 2), actions=[(4, 2, 2)])
    assert {p.dtype for p in reloaded(policy, tmp_path).parameters()} == {torch.float32}


@pytest.mark.parametrize("make", [
    lambda target: LTDPolicy(depth=3, top_k=2, total_tokens=6, depth_actor=(8,), depth_critic=(8,), size_actor=(8,),
                             size_critic=(8,)),
    lambda target: RadarPolicy(depth=4, top_k=2, total_tokens=8, lstm_hidden=8, mlp_hidden=8),
    lambda target: ReSpSPolicy.for_target(target.config, net_arch=(8,)),
], ids=["ltd", "radar", "resps"])
def test_a_bfloat16_policy_decides_inside_generate(llama, make):
    ids = prompt(9, seed=5)
    expected = llama.generate(ids, max_new_tokens=12, do_sample=False)
    policy = make(llama).to(torch.bfloat16)
    drafter = hfas.CausalLMDrafter.from_target_layers(llama, 2)
    out = llama.generate(ids, max_new_tokens=12, do_sample=False, assistant_model=drafter, assistant_policy=policy)
    assert out.tolist() == expected.tolist()


@pytest.mark.parametrize("layers", [range(1, 4), np.array([1, 2, 3]), torch.tensor([1, 2, 3])],
                         ids=["range", "numpy", "tensor"])
def test_resps_sequences_of_any_kind_are_saved_as_plain_lists(tmp_path, layers):
    """json cannot encode them: huggingface_hub left them out, and the reload built the default (2, 4, 5)."""
    policy = ReSpSPolicy(hidden_size=8, num_target_layers=8, feature_layers=layers, net_arch=iter([8]),
                         actions=np.array([[4, 2, 2], [6, 3, 2]]))
    again = reloaded(policy, tmp_path)
    assert (again.feature_layers, again.actions, again.net_arch) == ((1, 2, 3), policy.actions, (8,))
    assert json.loads((tmp_path / "config.json").read_text())["feature_layers"] == [1, 2, 3]


@pytest.mark.parametrize("choices", [range(0, 3), np.array([0, 1, 2])], ids=["range", "numpy"])
def test_ltd_size_choices_of_any_kind_are_saved(tmp_path, choices):
    """Same count as the default [1, 2, 3], other values: the weights fit, so only the saved list tells them apart."""
    policy = LTDPolicy(**{**SMALL_LTD, "size_choices": choices})
    assert reloaded(policy, tmp_path).size_choices == [0, 1, 2]
    assert json.dumps(policy.saved_settings())  # what the bench digests


def _narrow_feature_resps() -> tuple[ReSpSPolicy, CycleState]:
    """A Re-SpS policy whose first feature is narrow (mean 100.2, std 0.1) and whose actor picks the second action
    unless that feature is above 2.5 standard deviations, and a state 1 standard deviation above the mean. Rounded to
    bfloat16 (a step of 0.5 near 100) the mean reads 100.0 and the feature 100.5: 5 standard deviations."""
    policy = ReSpSPolicy(hidden_size=2, feature_layers=(1,), actions=[(4, 2, 2), (6, 3, 2)], net_arch=())
    with torch.no_grad():
        policy.feature_mean.copy_(torch.tensor([100.2, 0.0]))
        policy.feature_std.copy_(torch.tensor([0.1, 1.0]))
        policy.actor[0].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
        policy.actor[0].bias.copy_(torch.tensor([-2.5, 0.0]))
    return policy, CycleState(context_length=10, features={1: torch.tensor([100.3, 0.0])})


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_resps_standardises_in_float32_and_decides_as_in_float32(dtype):
    """The feature statistics stay float32 through .to(dtype); only the standardised value is rounded. They were cast
    with the weights: the bfloat16 policy saw 5 standard deviations where there is 1, and drafted depth 2, not 3."""
    policy, state = _narrow_feature_resps()
    mean, std = policy.feature_mean.clone(), policy.feature_std.clone()
    decided = policy.tree_config(state)
    assert decided == TreeConfig(total_tokens=6, depth=3, top_k=2)
    policy.to(dtype)
    policy.end_episode()
    assert policy.actor[0].weight.dtype == dtype
    assert torch.equal(policy.feature_mean, mean) and torch.equal(policy.feature_std, std)
    assert policy.observation(state).dtype == dtype and float(policy.observation(state)[0]) == pytest.approx(1, 0.01)
    assert policy.tree_config(state) == decided


def test_a_bfloat16_resps_comes_back_bfloat16_with_float32_statistics(tmp_path):
    """Its file holds bfloat16 weights and float32 statistics: loading reads the dtype from the weights (a file of
    mixed dtypes came back float32), and keeps the statistics float32."""
    policy, state = _narrow_feature_resps()
    policy.to(torch.bfloat16)
    again = reloaded(policy, tmp_path)
    assert {name: tensor.dtype for name, tensor in again.state_dict().items()} == {
        "feature_mean": torch.float32, "feature_std": torch.float32,
        "actor.0.weight": torch.bfloat16, "actor.0.bias": torch.bfloat16,
        "critic.0.weight": torch.bfloat16, "critic.0.bias": torch.bfloat16,
    }
    for (name, mine), theirs in zip(policy.state_dict().items(), again.state_dict().values()):
        assert torch.equal(mine, theirs), name
    assert again.tree_config(state) == TreeConfig(total_tokens=6, depth=3, top_k=2)


def test_the_shipped_resps_cast_to_bfloat16_keeps_its_statistics_and_comes_back_the_same(tmp_path):
    shipped = AutoDraftPolicy.from_pretrained(hfas.shipped_checkpoint("resps"))
    policy = AutoDraftPolicy.from_pretrained(hfas.shipped_checkpoint("resps")).to(torch.bfloat16)
    for name in ("feature_mean", "feature_std"):
        assert torch.equal(getattr(policy, name), getattr(shipped, name)), name
    again = reloaded(policy, tmp_path)
    assert again.actor[0].weight.dtype == torch.bfloat16
    for (name, mine), theirs in zip(policy.state_dict().items(), again.state_dict().values()):
        assert torch.equal(mine, theirs), name


@pytest.mark.parametrize("make", [lambda: StaticTreePolicy(depth=3, top_k=2, total_tokens=6),
                                  lambda: hfas.LookupFirstPolicy(depth=2, top_k=4, total_tokens=8),
                                  HeuristicLengthPolicy, ConfidenceThresholdPolicy],
                         ids=["static", "lookup-first", "heuristic-length", "confidence"])
def test_what_a_static_or_heuristic_policy_was_ranked_on_is_saved(tmp_path, make):
    """recommended_policy() marks the static tree it ranked on the profile's curve; the mark was dropped on saving,
    so the reloaded policy no longer reported a call on another curve, and its card's lookup branch had no record."""
    policy = make()
    assert reloaded(policy, tmp_path / "plain").trained_on is None  # unmarked stays unmarked
    identity = DrafterIdentity("org/drafter", "abc123")
    policy.mark_trained_on(COMPILED, identity, lookup_tokens=4, lookup_ngram_size=2)
    back = reloaded(policy, tmp_path / "marked")
    assert type(back) is type(policy) and back.trained_on == COMPILED
    assert (back.trained_for_drafter, back.trained_with_lookup_tokens, back.trained_with_lookup_ngram_size) == (
        identity, 4, 2)
    assert back._current_settings() == policy._current_settings()


def test_an_unmarked_static_policy_saves_the_settings_it_saved_before_it_could_be_marked():
    """The bench resumes a run only with the policies it started with, by a digest of their saved settings: writing
    the unset training record changed every static tree's digest, and resuming a run was refused as 'retrained'."""
    from hf_adaptive_spec.bench.methods.base import policy_digest

    policy = hfas.LookupFirstPolicy(depth=2, top_k=4, total_tokens=8)
    assert policy.saved_settings() == {"depth": 2, "top_k": 4, "total_tokens": 8, "sample_drafts": False}
    assert policy_digest(policy) == "917d7658a7f7a05147f8e25e27ef10ba"  # session 86's progress file holds it
    assert set(HeuristicLengthPolicy().saved_settings()) == {"initial_depth", "max_depth", "threshold", "adaptive",
                                                         "transient"}
    assert set(ConfidenceThresholdPolicy().saved_settings()) == {"depth", "threshold", "adaptive"}
    assert "trained_on" in LTDPolicy(**SMALL_LTD).saved_settings()  # a learned policy writes its record, set or not
