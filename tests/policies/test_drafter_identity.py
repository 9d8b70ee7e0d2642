"""A learned policy says which drafter it was trained with; a call with another drafter is reported."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_models import SMALL_LEARNED_POLICIES, SMALL_LTD, prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core import CostCurve
from hf_adaptive_spec.core.drafter_identity import DrafterIdentity, drafter_mismatch, weights_digest
from hf_adaptive_spec.policies import AutoDraftPolicy, LTDPolicy
from hf_adaptive_spec.profiling import HardwareProfile

EAGER_FP32 = {"device": "cpu", "dtype": "float32", "path": "eager"}


def _speculation(model, drafter, policy):
    out = model.generate(prompt(6), max_new_tokens=6, do_sample=False, assistant_model=drafter,
                         assistant_policy=policy, return_dict_in_generate=True)
    return out.speculation


def test_the_engine_reports_a_policy_trained_with_another_drafter():
    """Recognised by the weights, not the name: the same drafter object changed in place (a retrained drafter
    keeps its folder's name) is another drafter, and so is one of other weights."""
    model = tiny_model("llama")
    drafter, other = (hfas.CausalLMDrafter.from_target_layers(model, layers) for layers in (2, 1))
    policy = LTDPolicy(trained_on=EAGER_FP32, **SMALL_LTD)
    policy.mark_trained_on(CostCurve(**EAGER_FP32), DrafterIdentity("org/drafter", drafter.weights_digest()))
    assert _speculation(model, drafter, policy).policy_drafter_mismatch is None
    note = _speculation(model, other, policy).policy_drafter_mismatch
    assert "LTDPolicy was trained with the drafter org/drafter" in note
    assert "this call drafts with CausalLMDrafter, whose weights are not those" in note and "Retrain the policy" in note
    with torch.no_grad():
        drafter.model.lm_head.weight.mul_(1.5)  # the drafter retrained in place: its versions move
    assert "whose weights are not those" in _speculation(model, drafter, policy).policy_drafter_mismatch
    untagged = LTDPolicy(trained_on=EAGER_FP32, **SMALL_LTD)  # trained before drafters were recorded
    assert _speculation(model, other, untagged).policy_drafter_mismatch is None


def test_a_drafter_that_cannot_be_matched_by_its_weights_is_reported_as_such():
    assert drafter_mismatch("P", None, "D", None) is None
    trained_for = DrafterIdentity("org/drafter", "ab" * 16)
    assert drafter_mismatch("P", trained_for, "D", "ab" * 16) is None
    note = drafter_mismatch("P", trained_for, "DVIDrafter", None)
    assert "this call drafts with DVIDrafter, which cannot be matched to it by its weights" in note


def test_a_write_no_version_shows_changes_the_digest_once_weights_changed_says_so():
    """A write through .data bumps no tensor version; after the documented weights_changed() the digest stayed the
    old weights', so a learned policy's drafter-mismatch report could not see the change. The drafter's own
    weights (EAGLE-3) and a drafter on the target's layers (told through fast_path) both count now."""
    from tiny_models import tiny_eagle3

    target = tiny_model("llama")
    eagle3 = tiny_eagle3(target)
    before = eagle3.weights_digest()
    with torch.no_grad():
        eagle3.model.fc.weight.data.add_(1.0)
    assert eagle3.weights_digest() == before  # unseen, as documented, until the drafter is told
    eagle3.weights_changed()
    assert eagle3.weights_digest() != before
    early_exit = hfas.CausalLMDrafter.from_target_layers(target, 2)
    before = early_exit.weights_digest()
    with torch.no_grad():
        target.model.layers[0].mlp.down_proj.weight.data.mul_(2.0)
    hfas.fast_path(target).weights_changed()
    assert early_exit.weights_digest() != before


def test_the_digest_does_not_depend_on_the_dtype_the_weights_were_loaded_in():
    model = tiny_model("llama")
    module = hfas.CausalLMDrafter.from_target_layers(model, 2).model
    digest = weights_digest(module)
    assert weights_digest(module.to(torch.bfloat16)) == digest
    with torch.no_grad():
        next(module.parameters()).add_(1.0)
    assert weights_digest(module) != digest


@pytest.mark.parametrize("policy_class,kwargs", SMALL_LEARNED_POLICIES)
def test_trained_for_drafter_is_saved_and_set_from_the_training_profile(tmp_path, policy_class, kwargs):
    policy = policy_class(**kwargs)
    assert policy.trained_for_drafter is None
    profile = HardwareProfile(device="cpu", dtype="float32", num_threads=2, context_length=8, verify_tokens=[1],
                              verify_seconds=[0.01], drafter="org/drafter", drafter_weights="cd" * 16)
    policy.mark_trained_on(profile.cost_curve(), profile.drafter_identity())
    policy.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["trained_for_drafter"] == {
        "name": "org/drafter", "weights": "cd" * 16}
    assert AutoDraftPolicy.from_pretrained(tmp_path).trained_for_drafter == DrafterIdentity("org/drafter", "cd" * 16)
    unkept = HardwareProfile(device="cpu", dtype="float32", num_threads=2, context_length=8, verify_tokens=[1],
                             verify_seconds=[0.01], drafter="org/drafter")  # a profile made before digests were kept
    assert unkept.drafter_identity() is None


def test_a_malformed_trained_for_drafter_entry_names_the_fix():
    for malformed in ({"name": "org/drafter"}, {"name": "a", "weights": "b", "step": 3}, "org/drafter"):
        with pytest.raises(ValueError, match="trained_for_drafter must be a dict with name and weights.*config.json"):
            LTDPolicy(**SMALL_LTD, trained_for_drafter=malformed)


@pytest.mark.parametrize("method", ["ltd", "radar", "resps"])
def test_each_shipped_policy_names_the_drafter_it_was_trained_with(method):
    """The shipped policies record the EAGLE-3 drafter weights they were trained with, so a call with the drafter
    shipped now is compared with them (the engine says when they are another drafter's)."""
    policy = AutoDraftPolicy.from_pretrained(hfas.shipped_checkpoint(method))
    assert policy.trained_for_drafter is not None
    assert policy.trained_for_drafter.name == "hf_adaptive_spec:eagle3-smollm2-135m-instruct"
    assert len(policy.trained_for_drafter.weights) == 32


def test_a_tree_chosen_for_another_drafter_and_curve_is_told_to_be_chosen_again():
    """A StaticTreePolicy marked by mark_trained_on (recommended_policy's tree) was told to 'retrain the policy ... or
    use a StaticTreePolicy': it is one, and nothing trains it; the profile command recommends the tree instead."""
    model = tiny_model("llama")
    other = hfas.CausalLMDrafter.from_target_layers(model, 1)
    tree = hfas.StaticTreePolicy.chain(2)
    tree.mark_trained_on(CostCurve("cpu", "bfloat16", "compiled"), DrafterIdentity("org/drafter", "ab" * 16))
    speculation = _speculation(model, other, tree)
    for note in (speculation.policy_cost_curve_mismatch, speculation.policy_drafter_mismatch):
        assert "StaticTreePolicy was chosen for the" in note and "recommends the tree for" in note
        assert "retrain" not in note.lower() and "use a StaticTreePolicy" not in note
    assert ("`hf-adaptive-spec profile --device cpu --dtype float32 --recording DIR` (a recording of the drafter) "
            "measures this one") in speculation.policy_cost_curve_mismatch
    assert "profile --recording DIR` recommends the tree" in speculation.policy_drafter_mismatch


def test_a_policy_says_whether_its_choices_were_learned():
    """The reports' advice (retrain, or choose again) follows DraftPolicy.learned: a network by default, and a user's
    policy learned some other way says so."""
    class Tabular(hfas.DraftPolicy):
        learned = True

    assert LTDPolicy(**SMALL_LTD).learned and Tabular().learned
    assert not hfas.StaticTreePolicy().learned and not hfas.ConfidenceThresholdPolicy().learned
    note = drafter_mismatch("Tabular", DrafterIdentity("org/drafter", "ab" * 16), "D", "cd" * 16,
                            Tabular().learned)
    assert "Retrain the policy" in note
