"""transformers' assisted-generation heuristics as policies: the confidence threshold (with its ROC
adaptation) and the +2/-1 length schedule, on the hooks and through generate."""

from __future__ import annotations

import json
import math

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.policies import CycleFeedback, DraftStepInfo, TreeConfig, VerifySizeInfo
from hf_adaptive_spec.policies.heuristics import chain_probabilities, roc_threshold


def _feedback(depth: int, accepted: int, drafter_accepted: int | None = None,
              committed: int | None = None) -> CycleFeedback:
    """A cycle's outcome; ``drafter_accepted`` below ``accepted`` where the lookup branch carried the path,
    ``committed`` below ``accepted + 1`` where the output ended inside the accepted path."""
    return CycleFeedback(context_length=10, draft_depth=depth, verified_tokens=depth + 1, accepted_length=accepted,
                         draft_time=0.0, verify_time=0.0, policy_time=0.0,
                         drafter_accepted_length=accepted if drafter_accepted is None else drafter_accepted,
                         committed_tokens=committed)


def _chain_info(probs: list[float], total_tokens: int | None = None) -> VerifySizeInfo:
    """A drafted chain of these draft probabilities, in a tree of ``total_tokens`` (a chain of them by default)."""
    cumulative = torch.tensor([sum(math.log(x) for x in probs[: d + 1]) for d in range(len(probs))])
    config = TreeConfig(len(probs), 1, len(probs) + 1 if total_tokens is None else total_tokens)
    return VerifySizeInfo(10, cumulative, torch.arange(1, len(probs) + 1), config)


def _step(depth: int, cumulative: float, config: TreeConfig) -> DraftStepInfo:
    return DraftStepInfo(depth=depth, context_length=10, step_scores=torch.tensor([cumulative]), config=config)


def test_drafting_stops_after_the_first_token_below_the_threshold():
    policy = hfas.ConfidenceThresholdPolicy(depth=6, threshold=0.4, adaptive=False)
    config = policy.tree_config(None)
    p = [0.9, 0.5, 0.3, 0.9]
    cumulative = [sum(math.log(x) for x in p[: d + 1]) for d in range(len(p))]
    decisions = [policy.continue_drafting(_step(d + 1, cumulative[d], config)) for d in range(3)]
    assert decisions == [True, True, False]  # 0.3 is drafted (and verified), then drafting stops
    policy.tree_config(None)  # a new cycle starts from the root again
    assert policy.continue_drafting(_step(1, math.log(0.35), config)) is False


def test_chain_probabilities_come_from_the_cumulative_scores():
    scores = torch.tensor([math.log(0.9 * 0.5), math.log(0.9)])  # depth 2 listed first
    info = VerifySizeInfo(context_length=10, scores=scores, depths=torch.tensor([2, 1]), config=TreeConfig(2, 1, 3))
    assert chain_probabilities(info) == pytest.approx([0.9, 0.5])


def test_roc_threshold_minimises_false_positives_plus_three_false_negatives():
    # separable: the lowest accepted probability keeps every accept and no reject
    assert roc_threshold([0.9, 0.8, 0.7, 0.3, 0.2], [True, True, True, False, False]) == 0.7
    # 4 accepts (0.9, 0.6, 0.3, 0.2), 2 rejects (0.55, 0.5); cost = FPR + 3 FNR at each threshold:
    # 0.9: 0 + 2.25; 0.6: 0 + 1.5; 0.55: 0.5 + 1.5; 0.5: 1 + 1.5; 0.3: 1 + 0.75; 0.2: 1 + 0 -> 0.2 wins
    probs, accepted = [0.9, 0.6, 0.5, 0.2, 0.55, 0.3], [True, True, False, True, False, True]
    assert roc_threshold(probs, accepted) == 0.2
    assert roc_threshold([0.9, 0.8], [True, True]) is None  # one outcome only: no curve


def test_the_threshold_adapts_to_the_outcomes():
    policy = hfas.ConfidenceThresholdPolicy(depth=4, threshold=0.4, adaptive=True)
    config = TreeConfig(4, 1, 5)
    for _ in range(3):  # chains of 0.95, 0.9, 0.6, 0.5: the first three accepted, the fourth rejected
        probs = [0.95, 0.9, 0.6, 0.5]
        cumulative = torch.tensor([sum(math.log(x) for x in probs[: d + 1]) for d in range(4)])
        policy.num_tokens_to_verify(VerifySizeInfo(10, cumulative, torch.arange(1, 5), config))
        policy.observe(_feedback(depth=4, accepted=3))
    assert policy.probs[:4] == pytest.approx([0.95, 0.9, 0.6, 0.5]) and policy.accepted[:4] == [True, True, True, False]
    assert policy.current_threshold == pytest.approx(0.6)  # between the accepted 0.6 and the rejected 0.5
    assert policy.threshold == 0.4  # the setting, where the next call starts
    frozen = hfas.ConfidenceThresholdPolicy(depth=4, threshold=0.4, adaptive=False)
    frozen.num_tokens_to_verify(VerifySizeInfo(10, cumulative, torch.arange(1, 5), config))
    frozen.observe(_feedback(depth=4, accepted=3))
    assert frozen.current_threshold == 0.4


def test_confidence_samples_start_afresh_with_each_generate_call():
    """transformers makes its candidate generator, and so its ROC samples, per call. Kept across calls, the samples
    would grow for the life of the policy, and so would the sort each cycle does over them."""
    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    used = hfas.ConfidenceThresholdPolicy(depth=6)
    for seed in range(3):
        fresh = hfas.ConfidenceThresholdPolicy(depth=6)
        for policy in (used, fresh):
            model.generate(prompt(7, seed=seed), max_new_tokens=30, do_sample=False, assistant_model=drafter,
                           assistant_policy=policy)
        assert (used.probs, used.accepted) == (fresh.probs, fresh.accepted) and fresh.probs, seed



def test_heuristics_learn_from_the_drafter_chain_not_the_lookup_branch():
    """With prompt lookup a cycle may accept more tokens than the drafter's chain got right (the path
    went through the lookup chain): transformers' rules count only the assistant's own matches."""
    confidence = hfas.ConfidenceThresholdPolicy(depth=4, threshold=0.4)
    cumulative = torch.tensor([sum(math.log(x) for x in [0.9, 0.8, 0.7, 0.6][: d + 1]) for d in range(4)])
    confidence.num_tokens_to_verify(VerifySizeInfo(10, cumulative, torch.arange(1, 5), TreeConfig(4, 1, 5)))
    confidence.observe(_feedback(depth=4, accepted=4, drafter_accepted=1))
    assert confidence.accepted == [True, False]  # the chain's second token was rejected
    length = hfas.HeuristicLengthPolicy(initial_depth=3, max_depth=8)
    length.observe(_feedback(depth=3, accepted=4, drafter_accepted=2))
    assert length.depth == 2  # the chain was not accepted whole: shrink


def test_heuristic_length_grows_by_two_and_shrinks_by_one():
    policy = hfas.HeuristicLengthPolicy(initial_depth=3, max_depth=8)
    depths = []
    for accepted_all in (True, True, False, False, True, True):
        depth = policy.tree_config(None).depth
        depths.append(depth)
        policy.observe(_feedback(depth, depth if accepted_all else 0))
    assert depths == [3, 5, 7, 6, 5, 7]
    policy.observe(_feedback(7, 7))
    assert policy.depth == 8  # capped at max_depth
    for _ in range(10):
        policy.observe(_feedback(policy.depth, 0))
    assert policy.depth == 1  # never below one token
    with pytest.raises(ValueError, match="initial_depth"):
        hfas.HeuristicLengthPolicy(initial_depth=0)


def test_initial_depth_set_after_construction_is_the_chain_the_next_call_starts_from(tmp_path):
    """transformers' num_assistant_tokens is both where a call starts and what its "heuristic" schedule adapted:
    policy.initial_depth is policy.depth. It was a second attribute, checked and never read: the chain stayed where
    the schedule had left it, and save_pretrained wrote that as initial_depth."""
    policy = hfas.HeuristicLengthPolicy(initial_depth=2, max_depth=8, threshold=0)  # no gate: the chain drafted whole
    policy.observe(_feedback(2, 0))  # shrunk to 1
    assert policy.initial_depth == policy.depth == 1
    policy.initial_depth = 6
    assert policy.depth == 6 and policy.tree_config(None).depth == 6
    policy.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["initial_depth"] == 6
    again = hfas.AutoDraftPolicy.from_pretrained(tmp_path)
    assert again.initial_depth == again.depth == 6
    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    out = model.generate(prompt(7), max_new_tokens=12, do_sample=False, assistant_model=drafter,
                         assistant_policy=policy, return_dict_in_generate=True)
    assert out.speculation.draft_depths[0] == 6


def test_heuristic_length_counts_a_shortened_chain_as_transformers_counts_its_candidates():
    """transformers grows its length when every candidate it drafted matched (``len(scores[0]) - 1``, after its own
    cap at the end of the output), not the length it asked for: a chain the engine shortened to 3 and accepted whole
    grows the length, one with a rejection shrinks it."""
    policy = hfas.HeuristicLengthPolicy(initial_depth=6, max_depth=16)
    policy.observe(_feedback(depth=3, accepted=3))
    assert policy.depth == 8
    policy.observe(_feedback(depth=3, accepted=2))
    assert policy.depth == 7


@pytest.mark.parametrize("depths", [dict(initial_depth=8, max_depth=10.0), dict(initial_depth=2.5, max_depth=8),
                                    dict(initial_depth=True, max_depth=8)])
def test_a_chain_length_that_is_not_an_int_is_refused_when_the_policy_is_built(depths):
    """max_depth=10.0 was accepted and failed inside generate, as TreeConfig.depth, once the chain grew to it."""
    with pytest.raises(ValueError, match="HeuristicLengthPolicy needs ints 1 <= initial_depth <= max_depth"):
        hfas.HeuristicLengthPolicy(**depths)


@pytest.mark.parametrize("policy", [hfas.ConfidenceThresholdPolicy(depth=6),
                                    hfas.HeuristicLengthPolicy(initial_depth=4)])
def test_heuristic_policies_keep_generate_lossless(policy, tmp_path):
    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    for seed in range(3):
        ids = prompt(7, seed=seed)
        expected = model.generate(ids, max_new_tokens=30, do_sample=False)
        out = model.generate(ids, max_new_tokens=30, do_sample=False, assistant_model=drafter, assistant_policy=policy)
        assert torch.equal(out, expected)
    policy.save_pretrained(tmp_path)
    assert type(hfas.AutoDraftPolicy.from_pretrained(tmp_path)) is type(policy)


@pytest.mark.parametrize("policy_class", [hfas.ConfidenceThresholdPolicy, hfas.HeuristicLengthPolicy])
def test_each_generate_call_starts_from_the_configured_threshold(policy_class, tmp_path):
    """transformers deep-copies its assistant's generation config every call and writes back only
    num_assistant_tokens: the threshold it adapted is gone at the next call. The package carried it over."""
    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    policy = policy_class(threshold=0.4)
    policy.current_threshold = 0.9  # as a call's ROC adaptation leaves it
    model.generate(prompt(7), max_new_tokens=1, do_sample=False, assistant_model=drafter, assistant_policy=policy)
    assert policy.current_threshold == 0.4
    policy.current_threshold = 0.9
    policy.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["threshold"] == 0.4


def test_eagle3_heuristic_is_transformers_heuristic_at_its_defaults():
    """transformers' "heuristic" schedule runs with assistant_confidence_threshold at 0.4 (adapted), unless it is 0:
    the length policy had no gate, so eagle3-heuristic was transformers' heuristic with the gate off."""
    policy = hfas.HeuristicLengthPolicy()
    assert (policy.threshold, policy.adaptive, policy.depth) == (0.4, True, 20)
    config = policy.tree_config(None)
    assert [policy.continue_drafting(_step(1, math.log(0.9), config)),
            policy.continue_drafting(_step(2, math.log(0.9 * 0.3), config))] == [True, False]
    ungated = hfas.HeuristicLengthPolicy(threshold=0)
    ungated.tree_config(None)
    assert ungated.continue_drafting(_step(1, math.log(0.01), config)) is True  # the schedule alone, as before


def test_the_length_grows_after_a_gated_chain_accepted_whole_and_the_gate_adapts():
    policy = hfas.HeuristicLengthPolicy(initial_depth=6, max_depth=16)
    for _ in range(3):  # the gate stopped each chain after 4 tokens; 3 were accepted
        policy.tree_config(None)
        policy.num_tokens_to_verify(_chain_info([0.95, 0.9, 0.6, 0.3], total_tokens=7))
        policy.observe(_feedback(depth=4, accepted=3))
    assert policy.depth == 3 and policy.current_threshold == pytest.approx(0.6)
    policy.tree_config(None)
    policy.num_tokens_to_verify(_chain_info([0.95, 0.9], total_tokens=4))
    policy.observe(_feedback(depth=2, accepted=2))
    assert policy.depth == 5  # every token the gate let through was accepted: +2


@pytest.mark.parametrize("threshold", [0, 0.0, None])
def test_a_threshold_of_zero_or_none_turns_the_gate_and_its_adaptation_off(threshold):
    """transformers checks the threshold's truth: 0 (or None) neither gates nor adapts. The package adapted a
    threshold of 0 away from 0, turning the gate on after six samples."""
    policy = hfas.ConfidenceThresholdPolicy(depth=4, threshold=threshold)
    for _ in range(3):
        policy.tree_config(None)
        policy.num_tokens_to_verify(_chain_info([0.95, 0.9, 0.6, 0.5]))
        policy.observe(_feedback(depth=4, accepted=3))
    assert policy.current_threshold == threshold and policy.probs == []
    policy.tree_config(None)
    assert policy.continue_drafting(_step(1, math.log(0.01), policy.config)) is True


def test_a_chain_the_output_ended_inside_is_not_accepted_whole():
    """transformers counts n_matches after cutting at an end-of-sequence token: a chain whose accepted drafts hold
    it is a miss (-1). The package grew the length (+2)."""
    policy = hfas.HeuristicLengthPolicy(initial_depth=4, max_depth=16)
    policy.observe(_feedback(depth=4, accepted=4, committed=3))  # EOS at the third draft token
    assert policy.depth == 3
    policy.observe(_feedback(depth=3, accepted=3, committed=4))  # EOS as the bonus token: every draft kept
    assert policy.depth == 5


def test_a_cycle_with_no_room_to_draft_counts_as_accepted_whole():
    """At the end of the output transformers' assistant drafts nothing, and 0 matches of 0 candidates is +2; the
    package left the length unchanged."""
    policy = hfas.HeuristicLengthPolicy(initial_depth=4, max_depth=16)
    policy.observe(_feedback(depth=0, accepted=0))
    assert policy.depth == 6


def test_a_transient_length_starts_every_call_from_initial_depth(tmp_path):
    """num_assistant_tokens_schedule="heuristic_transient" adapts within a call and starts the next from
    num_assistant_tokens again; the package had no equivalent."""
    policy = hfas.HeuristicLengthPolicy(initial_depth=3, max_depth=16, transient=True)
    policy.observe(_feedback(depth=3, accepted=3))
    assert policy.depth == 5 and policy.initial_depth == 3
    policy.begin_generation()
    assert policy.depth == 3
    policy.save_pretrained(tmp_path)
    again = hfas.AutoDraftPolicy.from_pretrained(tmp_path)
    assert (again.transient, again.initial_depth, again.depth) == (True, 3, 3)
    carried = hfas.HeuristicLengthPolicy(initial_depth=3, max_depth=16)
    carried.observe(_feedback(depth=3, accepted=3))
    carried.begin_generation()
    assert carried.depth == carried.initial_depth == 5


def test_the_heuristic_transient_schedule_warns_with_its_equivalent(caplog):
    model = tiny_model("llama")
    drafter = hfas.CausalLMDrafter.from_target_layers(model, 2)
    hfas.generation.input_checks.logger.warning_once.cache_clear()
    with caplog.at_level("WARNING"):
        model.generate(prompt(7), max_new_tokens=2, do_sample=False, assistant_model=drafter,
                       assistant_policy=hfas.HeuristicLengthPolicy(initial_depth=2),
                       num_assistant_tokens_schedule="heuristic_transient")
    assert "HeuristicLengthPolicy(initial_depth=..., transient=True)" in caplog.text


def test_a_chain_capped_by_the_largest_bucket_grows_to_at_most_what_the_bucket_holds():
    """With a verification-bucket cap every chain is accepted whole more often (it is short), and +2 a cycle ran the
    length away to max_depth: it now grows to at most the chain the bucket let the engine draft."""
    policy = hfas.HeuristicLengthPolicy(initial_depth=20, max_depth=64, threshold=0)
    for _ in range(5):
        policy.tree_config(None)
        policy.num_tokens_to_verify(_chain_info([0.9] * 15, total_tokens=16))  # fitted to a bucket of 16
        policy.observe(_feedback(depth=15, accepted=15))
    assert policy.depth == 15
    policy.tree_config(None)  # a chain of 15 fits: no cap, the schedule as before
    policy.num_tokens_to_verify(_chain_info([0.9] * 15))
    policy.observe(_feedback(depth=15, accepted=15))
    assert policy.depth == 17


def test_a_length_policy_saved_before_the_gate_loads_as_it_ran(tmp_path, caplog):
    """A HeuristicLengthPolicy saved before it had the confidence gate (no 'threshold' in its config.json) ran the
    +2/-1 schedule alone: loading it with the gate's default 0.4 would silently change the saved baseline."""
    import logging

    hfas.HeuristicLengthPolicy(initial_depth=5, threshold=0.0).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    for key in ("threshold", "adaptive", "transient"):
        config.pop(key)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with caplog.at_level(logging.WARNING):
        loaded = hfas.HeuristicLengthPolicy.from_pretrained(tmp_path)
    assert loaded.threshold is None and loaded.initial_depth == 5
    assert "saved before HeuristicLengthPolicy had transformers' confidence gate" in caplog.text
    assert hfas.HeuristicLengthPolicy.from_pretrained(tmp_path, threshold=0.4).threshold == 0.4
