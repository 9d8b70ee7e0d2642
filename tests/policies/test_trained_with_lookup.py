"""A learned policy says which prompt-lookup branch it was trained with; a call with another one is reported.

A policy trained on replayed trees that carried the branch learned how often the branch's chain carries the
accepted path; run without it, its choices assume acceptance the call does not have, and the output is exact either
way: only ``out.speculation.policy_lookup_mismatch`` (and the bench's note) can say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_models import SMALL_LEARNED_POLICIES, SMALL_LTD, prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.core import CostCurve
from hf_adaptive_spec.policies import AutoDraftPolicy, LTDPolicy
from hf_adaptive_spec.policies.base import lookup_mismatch

EAGER_FP32 = CostCurve(device="cpu", dtype="float32", path="eager")


def _speculation(model, drafter, policy, **lookup):
    out = model.generate(prompt(6), max_new_tokens=6, do_sample=False, assistant_model=drafter,
                         assistant_policy=policy, return_dict_in_generate=True, **lookup)
    return out.speculation


def test_the_engine_reports_a_call_with_another_prompt_lookup_branch():
    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    policy = LTDPolicy(**SMALL_LTD)
    policy.mark_trained_on(EAGER_FP32, None, 2)
    assert _speculation(model, drafter, policy, prompt_lookup_num_tokens=2).policy_lookup_mismatch is None
    note = _speculation(model, drafter, policy).policy_lookup_mismatch
    assert note.startswith("LTDPolicy was trained with the 2-token prompt-lookup branch and this call runs with no "
                           "prompt-lookup branch")
    assert ("Pass prompt_lookup_num_tokens=2 to generate, or retrain the policy with --lookup_tokens 0 and without the "
            "settings that need the branch." in note)
    longer = _speculation(model, drafter, policy, prompt_lookup_num_tokens=3).policy_lookup_mismatch
    assert "this call runs with the 3-token prompt-lookup branch" in longer
    policy.mark_trained_on(EAGER_FP32, None, 0)  # trained without the branch, called with it
    note = _speculation(model, drafter, policy, prompt_lookup_num_tokens=2).policy_lookup_mismatch
    assert "trained with no prompt-lookup branch" in note and "Drop prompt_lookup_num_tokens" in note
    assert _speculation(model, drafter, policy).policy_lookup_mismatch is None
    untagged = LTDPolicy(**SMALL_LTD)  # trained before the branch was recorded: nothing to compare
    assert _speculation(model, drafter, untagged, prompt_lookup_num_tokens=2).policy_lookup_mismatch is None
    assert _speculation(model, drafter, hfas.StaticTreePolicy()).policy_lookup_mismatch is None


def test_the_engine_reports_a_call_matching_other_ngrams_with_the_same_branch():
    """The branch's length alone did not tell: a policy trained with 2-token n-grams, called with the same 2-token
    branch matching up to 3-token n-grams (max_matching_ngram_size=3), assumes another acceptance."""
    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    policy = LTDPolicy(**SMALL_LTD)
    policy.mark_trained_on(EAGER_FP32, None, 2, 2)
    assert _speculation(model, drafter, policy, prompt_lookup_num_tokens=2).policy_lookup_mismatch is None
    note = _speculation(
        model, drafter, policy, prompt_lookup_num_tokens=2, max_matching_ngram_size=3
    ).policy_lookup_mismatch
    assert note.startswith("LTDPolicy was trained with a prompt-lookup branch matching n-grams of up to 2 tokens and "
                           "this call matches up to 3")
    assert "Pass max_matching_ngram_size=2 to generate, or retrain the policy with --lookup_ngram_size 3." in note
    tree = hfas.StaticTreePolicy.chain(2)  # chosen with the branch: no retraining, and no profile option matches
    tree.mark_trained_on(EAGER_FP32, None, 2, 2)  # n-grams (its ranking replays 2-token ones)
    note = _speculation(
        model, drafter, tree, prompt_lookup_num_tokens=2, max_matching_ngram_size=3
    ).policy_lookup_mismatch
    assert note.endswith("Pass max_matching_ngram_size=2 to generate.")
    policy.mark_trained_on(EAGER_FP32, None, 2)  # the n-gram size not recorded: nothing to compare
    assert _speculation(
        model, drafter, policy, prompt_lookup_num_tokens=2, max_matching_ngram_size=3
    ).policy_lookup_mismatch is None


def test_the_report_is_none_only_when_the_branches_match_or_none_is_recorded():
    assert lookup_mismatch("P", None, 4) is None
    assert lookup_mismatch("P", 4, 4) is None and lookup_mismatch("P", 0, 0) is None
    assert lookup_mismatch("P", 4, 0) is not None and lookup_mismatch("P", 0, 4) is not None
    assert lookup_mismatch("P", 4, 10) is not None
    assert lookup_mismatch("P", 4, 4, 2, 2) is None and lookup_mismatch("P", 4, 4, None, 3) is None
    assert lookup_mismatch("P", 4, 4, 2, 3) is not None and lookup_mismatch("P", 4, 4, 3, 1) is not None
    assert "n-grams" not in lookup_mismatch("P", 4, 0, 2, 3)  # another length: that report, not the n-grams'


@pytest.mark.parametrize("policy_class,kwargs", SMALL_LEARNED_POLICIES)
def test_trained_with_lookup_tokens_is_saved_and_checked(tmp_path, policy_class, kwargs):
    policy = policy_class(**kwargs)
    assert policy.trained_with_lookup_tokens is None
    policy.mark_trained_on(EAGER_FP32, None, 4)
    policy.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["trained_with_lookup_tokens"] == 4
    assert AutoDraftPolicy.from_pretrained(tmp_path).trained_with_lookup_tokens == 4
    assert AutoDraftPolicy.from_pretrained(tmp_path).trained_with_lookup_ngram_size is None
    for bad in (-1, True, "4", 2.0):
        with pytest.raises(ValueError, match=r"trained_with_lookup_tokens must be .* got"):
            policy_class(**kwargs, trained_with_lookup_tokens=bad)
    policy.mark_trained_on(EAGER_FP32, None, 4, 3)
    policy.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["trained_with_lookup_ngram_size"] == 3
    assert AutoDraftPolicy.from_pretrained(tmp_path).trained_with_lookup_ngram_size == 3
    for bad in (0, True, "2", 2.0):
        with pytest.raises(ValueError, match=r"trained_with_lookup_ngram_size must be .* got"):
            policy_class(**kwargs, trained_with_lookup_tokens=4, trained_with_lookup_ngram_size=bad)
    policy.mark_trained_on(EAGER_FP32, None, 0, 3)  # no branch: no n-grams to record
    assert policy.trained_with_lookup_ngram_size is None


def test_the_shipped_learned_policies_record_the_branch_they_were_trained_with():
    """Each was trained with the 4-token branch matching n-grams of up to 2 tokens (its card's command has
    --lookup_tokens 4, and --lookup_ngram_size 2 or none, whose default is 2: session 58's
    results/policies_eager/avx2_fp32/retrain.sh, RADAR's compiled float32 one, LTD's and RADAR's compiled bfloat16
    ones)."""
    folders = [path.parent for path in hfas.shipped_checkpoint("ltd").parent.glob("*/config.json")]
    learned = [f for f in folders if json.loads((f / "config.json").read_text()).get("trained_on")]
    assert len(learned) == 6  # the three defaults, RADAR for compiled float32, LTD and RADAR for compiled bfloat16
    for folder in learned:
        assert json.loads((folder / "config.json").read_text())["trained_with_lookup_tokens"] == 4, folder.name
        assert json.loads((folder / "config.json").read_text())["trained_with_lookup_ngram_size"] == 2, folder.name
        assert "--lookup_tokens 4 " in (folder / "README.md").read_text(), folder.name


def _committed_policies_with_a_branch():
    root = Path(__file__).resolve().parents[2]
    configs = [*root.glob("hf_adaptive_spec/checkpoints/*/config.json"), *root.glob("artifacts/*/config.json")]
    for config in sorted(configs):
        record = json.loads(config.read_text())
        if record.get("trained_with_lookup_tokens") and config.with_name("README.md").is_file():
            yield config.parent


@pytest.mark.parametrize("folder", list(_committed_policies_with_a_branch()), ids=lambda folder: folder.name)
def test_a_committed_policy_cards_usage_line_passes_the_branch_it_was_trained_with(folder):
    """Followed as written, a usage line without the branch ran the policy without it: reported as a mismatch, and a
    lookup-first policy never looked up (the template left the branch out; two shipped RADAR cards did too)."""
    record = json.loads((folder / "config.json").read_text())
    usage = [line for line in (folder / "README.md").read_text().splitlines() if "assistant_policy=policy" in line]
    assert usage and all(f"prompt_lookup_num_tokens={record['trained_with_lookup_tokens']}" in line for line in usage)


def test_a_policy_saved_outside_a_trainer_writes_its_branch_into_the_cards_usage_line(tmp_path):
    policy = hfas.RadarPolicy(depth=3, top_k=2, total_tokens=6, lstm_hidden=8, mlp_hidden=8,
                              trained_with_lookup_tokens=4, trained_with_lookup_ngram_size=3)
    policy.save_pretrained(tmp_path / "branch")
    hfas.StaticTreePolicy(depth=2, top_k=2, total_tokens=4).save_pretrained(tmp_path / "none")
    usage = {name: [line for line in (tmp_path / name / "README.md").read_text().splitlines()
                    if "assistant_policy=policy" in line] for name in ("branch", "none")}
    branch = "assistant_policy=policy, prompt_lookup_num_tokens=4, max_matching_ngram_size=3)"
    assert usage["branch"][0].endswith(branch)
    assert usage["none"][0].endswith("assistant_policy=policy)")
