"""EAGLE-3 training: the held-out learning curve and the drafter's starting points."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest
import torch
from tiny_models import make_char_tokenizer, prompt, tiny_model
from transformers import DynamicCache, TrainerCallback

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3Drafter, Eagle3DraftModel
from hf_adaptive_spec.generation.prompt_lookup import lookup_continuation
from hf_adaptive_spec.training.eagle3 import (
    Eagle3Config,
    Eagle3Trainer,
    HeldOutCurveCallback,
    HeldOutPoint,
    HeldOutSet,
    TargetFeatures,
    TTTBatch,
    build_draft_vocabulary,
    chain_accepted,
    collate,
    copy_target_layer,
    decoding_walk,
    deepen,
    drafter_shape,
    initialize_drafter,
    load_samples,
    opening_prompt,
    prompt_digest,
    read_curve,
    ttt_unroll,
    widen_mlp,
    widen_vocabulary,
    without_training_prompts,
)
from hf_adaptive_spec.training.eagle3.script import Eagle3ScriptArguments, build_drafter

from .test_eagle3_training import _samples

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup():
    target = tiny_model("llama")
    samples = _samples(target, count=6, length=28)  # the target's own greedy continuations
    # a small draft vocabulary of the data's most frequent tokens: a random drafter is then often right
    vocabulary = build_draft_vocabulary(samples, 3, target.config.vocab_size)
    torch.manual_seed(1)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary, initializer_range=0.2).eval()
    return target, samples, draft


def test_chain_accepted_stops_at_the_first_miss():
    hits = [
        torch.tensor([[True, True, False, True]]),
        torch.tensor([[True, False, True, True]]),
        torch.tensor([[False, True, True, True]]),
    ]
    valid = torch.tensor([[True, True, True, False]])
    assert chain_accepted(hits, valid).tolist() == [2, 1, 0]


def test_decoding_walk_roots_each_cycle_where_the_last_stopped_and_skips_the_prefill_token():
    # two answers in one row (positions 1-6 and 9-11) and one in another
    chains = torch.tensor([[9, 9, 2, 0, 0, 1, 3, 9, 9, 9, 1, 0], [0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
    valid = torch.zeros_like(chains, dtype=torch.bool)
    valid[0, 1:7] = valid[0, 9:12] = valid[1, 0:4] = True
    # row 0: roots 2 (+3), 5 (+2), 7 stops the first answer; root 10 (+2) ends the second; row 1: root 1 (+3)
    assert decoding_walk(chains, valid) == [2, 1, 1, 2]


def test_decoding_walk_stops_at_the_answers_last_token_and_at_its_end_marker():
    chains = torch.tensor([[0, 5, 0, 0, 0, 0, 0, 0], [0, 2, 0, 0, 3, 0, 0, 0]])
    valid = torch.tensor([[True] * 4 + [False] * 4, [True] * 8])
    # row 0: the chain at root 1 would accept 5, but 2 answer tokens and the target's own are all that is left;
    # row 1: roots 1 (+3) and 4, whose chain of 3 ends at the answer's last token
    assert decoding_walk(chains, valid) == [2, 2, 3]
    ended = torch.zeros_like(valid)
    ended[1, 5] = True  # row 1's token 6 ends its answer: root 4's cycle emits it as the target's token
    assert decoding_walk(chains, valid, ended) == [2, 2, 0]


@pytest.mark.parametrize("end_marker", [False, True])
def test_decoding_tau_is_the_tau_generate_gets_on_the_same_answers(setup, end_marker):
    """A chain policy in generate accepts, cycle by cycle, what the held-out walk says it will, to the length cap
    and (``end_marker``: a frequent answer token made the end-of-sequence token) to the end of the answer."""
    target, samples, draft = setup
    depth, live, walked, stopped_early = 3, [], [], 0
    eos = target.generation_config.eos_token_id
    if end_marker:
        target.generation_config.eos_token_id = Counter(
            t for s in samples for t in s["input_ids"][10:]
        ).most_common(1)[0][0]
    try:
        for sample in samples:
            ids = torch.tensor([sample["input_ids"][:4]])
            out = target.generate(ids, max_new_tokens=len(sample["input_ids"]) - 4, do_sample=False,
                                  return_dict_in_generate=True, assistant_model=Eagle3Drafter(draft),
                                  assistant_policy=hfas.StaticTreePolicy.chain(depth))
            generated = out.sequences[0].tolist()
            assert sample["input_ids"][: len(generated)] == generated
            stopped_early += len(generated) < len(sample["input_ids"])
            live += out.speculation.accepted_lengths
            walked += HeldOutSet(target, [sample], draft, depth=depth).evaluate(draft).cycles
        point = HeldOutSet(target, samples, draft, depth=depth).point(draft, step=0, input_tokens_seen=0)
    finally:
        target.generation_config.eos_token_id = eos
    assert walked == live and max(live) >= (1 if end_marker else 2)  # cycles that accepted drafts happened
    assert (stopped_early > 0) == end_marker
    assert point.decoding_tau == pytest.approx(1 + sum(live) / len(live))
    assert point.decoding_tau != pytest.approx(point.chain_tau)  # the two measures differ on these answers


@torch.no_grad()
def _real_chain(draft, target, ids, t, depth):
    """Tokens a greedy chain drafted at root ``t`` gets accepted, drafting with the drafter's own tokens."""
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    fused, _ = features.run(ids, torch.ones_like(ids))
    greedy = target(ids).logits[0].argmax(-1)  # the target's choice after each position
    cache = DynamicCache()
    out = draft(ids[:, 1 : t + 2], fused[:, : t + 1], past_key_values=cache)
    accepted, hidden = 0, out.prenorm_hidden_states[:, -1:]
    token = draft.draft_to_target()[out.logits[0, -1].argmax()]
    for k in range(depth):
        if t + 2 + k >= ids.shape[1] or token != greedy[t + 1 + k]:
            break
        accepted += 1
        node = draft(token.view(1, 1), hidden, target_features=False, position_ids=torch.tensor([[t + 1 + k]]),
                     past_key_values=cache)
        hidden, token = node.prenorm_hidden_states, draft.draft_to_target()[node.logits[0, -1].argmax()]
    return accepted


def test_teacher_forced_chain_is_greedy_chain_drafting(setup):
    """On the target's own greedy answers, the held-out chain equals drafting and verifying for real."""
    target, samples, draft = setup
    held_out = HeldOutSet(target, samples, draft, depth=3)
    accepted = torch.cat(held_out.evaluate(draft).accepted)
    real, out_of_vocabulary = [], 0
    for sample in samples:
        ids = collate([sample], pad_token_id=0)["input_ids"]
        # every answer token, as drafting meets them
        roots = [t for t in range(ids.shape[1] - 2) if sample["loss_mask"][t + 2]]
        real += [_real_chain(draft, target, ids, t, 3) for t in roots]
        out_of_vocabulary += sum(not draft.t2d[ids[0, t + 2]] for t in roots)
    assert accepted.tolist() == real
    assert sum(real) > 0 and max(real) >= 2  # the comparison saw hits and chains longer than one
    assert out_of_vocabulary > 0  # and tokens the drafter cannot say, which drafting misses


def test_held_out_point_matches_its_definitions(setup):
    target, samples, draft = setup
    held_out = HeldOutSet(target, samples, draft, depth=2)
    counts = held_out.evaluate(draft)
    accuracy, accepted = counts.accuracy(), torch.cat(counts.accepted)
    point = held_out.point(draft, step=7, input_tokens_seen=70)
    assert point.step == 7 and point.input_tokens_seen == 70 and point.positions == accepted.numel()
    assert point.first_draft_acceptance == accuracy[0] == pytest.approx(float((accepted >= 1).float().mean()))
    assert point.chain_tau == pytest.approx(1 + float(accepted.float().mean()))
    # a token outside the draft vocabulary is a miss: acceptance is the in-vocabulary rate times the coverage
    assert 0 < point.draft_vocab_coverage < 1
    assert point.first_draft_acceptance == pytest.approx(point.in_vocabulary_acceptance * point.draft_vocab_coverage)
    assert point.first_draft_acceptance < point.in_vocabulary_acceptance
    with pytest.raises(ValueError, match="depth"):
        HeldOutSet(target, samples, draft, depth=0)
    with pytest.raises(ValueError, match="at least one conversation"):
        HeldOutSet(target, [], draft)


def test_tokens_after_an_answers_end_marker_are_not_measured(setup):
    """A chat template puts a newline after <|im_end|>; generate stops at the marker and never drafts it."""
    target, samples, draft = setup
    eos, end = target.generation_config.eos_token_id, 7
    target.generation_config.eos_token_id = end
    try:
        answer = [token for token in samples[0]["input_ids"] if token != end]
        ended = {"input_ids": answer + [end], "loss_mask": [0] * 4 + [1] * (len(answer) - 3)}
        with_newline = {"input_ids": ended["input_ids"] + [5], "loss_mask": ended["loss_mask"] + [1]}
        points = [HeldOutSet(target, [s], draft, depth=2).point(draft, 0, 0) for s in (ended, with_newline)]
    finally:
        target.generation_config.eos_token_id = eos
    assert points[0].positions == points[1].positions


@torch.no_grad()
def test_held_out_copy_acceptance_is_acceptance_on_the_tokens_a_prompt_lookup_proposes(setup):
    target, samples, draft = setup
    r = prompt(18, seed=11)[0].tolist()
    copying = r[:10] + r[:4] + r[10:14] + r[2:7] + r[14:18] + r[11:13]  # answers that copy islands of the prompt
    samples = samples + [{"input_ids": copying, "loss_mask": [0] * 10 + [1] * (len(copying) - 10)}]
    held_out = HeldOutSet(target, samples, draft, depth=2)
    point = held_out.point(draft, step=0, input_tokens_seen=0)
    answers, copied, hits = 0, [0, 0], [0, 0]
    for sample, (input_ids, fused, target_logits, loss_mask) in zip(samples, held_out.samples):
        steps = ttt_unroll(draft, TTTBatch(input_ids, fused, target_logits, loss_mask), 2)
        ids = input_ids[0]
        for k, step in enumerate(steps):
            for t in range(ids.shape[0] - 2 - k):  # step k at root t drafts token t + 2 + k, the target's at t + 1 + k
                j = t + 2 + k
                hit = step.logits[0, t].argmax() == target_logits[0, t + 1 + k].argmax() and step.mask[0, t]
                if sample["loss_mask"][j] and lookup_continuation(ids[:j], 2, 1) == [int(ids[j])]:
                    hits[k] += int(hit)
                    copied[k] += 1
        answers += sum(sample["loss_mask"][2:])
    assert point.copy_share == pytest.approx(copied[0] / answers)
    assert point.copy_step_accuracy == pytest.approx([hits[0] / copied[0], hits[1] / copied[1]])
    assert 0 < point.copy_share < 1 and sum(hits) > 0  # the answers repeat themselves, and the drafter is right on some


def _continuing_an_earlier_point(setup, depth: int):
    """A new drafter, a held-out set of chain ``depth`` and a curve callback continuing an earlier stage's point
    (step 10, 1000 tokens, measured at depth 2)."""
    target, samples, _ = setup
    vocabulary = build_draft_vocabulary(samples, 16, target.config.vocab_size)
    torch.manual_seed(0)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary)
    held_out = HeldOutSet(target, samples[:2], draft, depth=depth)
    earlier = HeldOutPoint(step=10, input_tokens_seen=1000, first_draft_acceptance=0.1, step_accuracy=[0.1, 0.1],
                           chain_tau=1.1, positions=5, drafter_shape=drafter_shape(draft), heldout_set=held_out.digest)
    return target, samples, draft, held_out, HeldOutCurveCallback(held_out, every_steps=2, previous=[earlier])


def test_curve_continues_an_earlier_stage_and_is_saved(setup, tmp_path):
    target, samples, draft, held_out, callback = _continuing_an_earlier_point(setup, depth=2)
    args = Eagle3Config(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=2, learning_rate=1e-3, ttt_steps=2,
        save_strategy="no", report_to=[], seed=0, disable_tqdm=True,
    )
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=0), callbacks=[callback])
    trainer.train()
    steps = [p.step for p in callback.points]
    assert steps == [10, 12, 14]  # the earlier stage's point, then every 2 steps; no new point for the same model
    tokens = [p.input_tokens_seen for p in callback.points]
    assert tokens[0] == 1000 < tokens[1] < tokens[2]
    assert [p.step for p in read_curve(tmp_path)] == steps
    trainer.save_model(str(tmp_path / "final"))
    assert read_curve(tmp_path / "final") == callback.points
    assert read_curve(tmp_path / "final" / "heldout_curve.jsonl") == callback.points  # a curve file reads as its folder
    assert any("heldout_chain_tau" in entry for entry in trainer.state.log_history)
    with pytest.raises(ValueError, match="every_steps"):
        HeldOutCurveCallback(held_out, every_steps=0)


def test_a_resumed_run_keeps_the_curve_up_to_its_checkpoint(setup, tmp_path):
    target, samples, _ = setup
    vocabulary = build_draft_vocabulary(samples, 16, target.config.vocab_size)

    def run(resume):
        torch.manual_seed(0)
        draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary)
        callback = HeldOutCurveCallback(HeldOutSet(target, samples[:2], draft, depth=2), every_steps=1)
        args = Eagle3Config(output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=2, ttt_steps=2,
                            save_strategy="steps", save_steps=2, report_to=[], seed=0, disable_tqdm=True)
        Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                      data_collator=lambda b: collate(b, pad_token_id=0),
                      callbacks=[callback]).train(resume_from_checkpoint=resume)
        return [p.step for p in read_curve(tmp_path)]

    assert run(None) == [0, 1, 2, 3, 4]
    assert run(str(tmp_path / "checkpoint-2")) == [0, 1, 2, 3, 4]  # not [2, 3, 4]: the points before it stay
    for curve in tmp_path.glob("checkpoint-*/heldout_curve.jsonl"):
        # as saved before points recorded the drafter's shape
        curve.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "drafter_shape"}) + "\n"
                                 for line in curve.read_text().splitlines()))
    assert run(str(tmp_path / "checkpoint-2")) == [0, 1, 2, 3, 4]  # no second point at step 2


@pytest.mark.parametrize("earlier_set", ["other conversations", None])
def test_a_curve_on_other_held_out_conversations_starts_its_own_first_point(setup, tmp_path, earlier_set):
    """A point measured on other conversations (or before the set was recorded) is not the same measure: the stage
    starts with a point of its own on its set, and every point records the set."""
    target, samples, _ = setup
    vocabulary = build_draft_vocabulary(samples, 16, target.config.vocab_size)
    torch.manual_seed(0)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary)
    held_out = HeldOutSet(target, samples[:2], draft, depth=2)
    assert held_out.digest != HeldOutSet(target, samples[1:3], draft, depth=2).digest
    earlier = HeldOutPoint(step=10, input_tokens_seen=1000, first_draft_acceptance=0.1, step_accuracy=[0.1, 0.1],
                           chain_tau=1.1, positions=5, drafter_shape=drafter_shape(draft), heldout_set=earlier_set)
    callback = HeldOutCurveCallback(held_out, every_steps=2, previous=[earlier])
    args = Eagle3Config(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, ttt_steps=2,
                        save_strategy="no", report_to=[], seed=0, disable_tqdm=True)
    Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                  data_collator=lambda b: collate(b, pad_token_id=0), callbacks=[callback]).train()
    assert [(p.step, p.heldout_set) for p in read_curve(tmp_path)] == [
        (10, earlier_set), (10, held_out.digest), (12, held_out.digest)
    ]


def test_held_out_conversations_that_open_with_a_training_prompt_are_left_out(setup):
    """The same opening prompt is the same greedy answer: such a conversation is not held out, whatever follows."""
    _, samples, _ = setup
    training = samples[:3]
    longer = {**samples[1], "input_ids": [*samples[1]["input_ids"], 7], "loss_mask": [*samples[1]["loss_mask"], 1]}
    other_answer = {**samples[2], "input_ids": [*samples[2]["input_ids"][:4], 5, 6], "loss_mask": [0, 0, 0, 0, 1, 1]}
    kept, dropped = without_training_prompts([samples[3], longer, samples[4], other_answer], training)
    assert kept == [samples[3], samples[4]] and dropped == 2
    assert without_training_prompts(samples[3:], training) == (samples[3:], 0)
    assert opening_prompt(samples[0]) == tuple(samples[0]["input_ids"][:4])


def test_curves_saved_before_coverage_was_measured_read_as_in_vocabulary_acceptance(tmp_path):
    old = ('{"step": 5, "input_tokens_seen": 50, "first_draft_acceptance": 0.4, "step_accuracy": [0.4], '
           '"chain_tau": 1.4, "positions": 9}')
    (tmp_path / "heldout_curve.jsonl").write_text(old + "\n", encoding="utf-8")
    (point,) = read_curve(tmp_path)
    assert point.first_draft_acceptance is None and point.in_vocabulary_acceptance == 0.4


def test_a_curve_or_lineage_write_cut_by_a_crash_leaves_the_file_as_it_was(tmp_path, crash_mid_write):
    """The held-out curve is rewritten in output_dir at every point: a run killed during that write left half a line,
    on which a next stage's init_from (or a plot of the run) failed with a bare JSONDecodeError."""
    from hf_adaptive_spec.training.eagle3 import Lineage, read_lineage, write_curve, write_lineage

    points = [HeldOutPoint(step=step, input_tokens_seen=10 * step, first_draft_acceptance=0.5, step_accuracy=[0.5],
                           chain_tau=1.5, positions=9) for step in (2, 4)]
    write_curve(tmp_path, points[:1])
    write_lineage(tmp_path, Lineage(frozenset({"a"})))
    with crash_mid_write():
        write_curve(tmp_path, points)
    with crash_mid_write():
        write_lineage(tmp_path, Lineage(frozenset({"a", "b"})))
    assert read_curve(tmp_path) == points[:1] and read_lineage(tmp_path) == Lineage(frozenset({"a"}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heldout_curve.jsonl", "trained_prompts.json"]


@torch.no_grad()
def test_target_layer_start_is_the_targets_last_layer_on_the_deepest_feature():
    """With the embedding half of q/k/v at zero, the draft layer computes the target's last layer
    on the deepest feature, and the head the target's own output over the draft vocabulary."""
    target = tiny_model("llama")
    vocabulary = torch.arange(0, 96, 3)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary, aux_hidden_state_layer_ids=[1, 2, 3])
    initialize_drafter(draft, target, "target_layer")
    hidden = draft.config.hidden_size
    for name in ("q_proj", "k_proj", "v_proj"):
        getattr(draft.midlayer.self_attn, name).weight[:, :hidden].zero_()
    ids = prompt(10, seed=2)
    states = target(ids, output_hidden_states=True).hidden_states
    fused = torch.cat([states[i] for i in (1, 2, 3)], dim=-1)
    out = draft(ids[:, 1:], fused[:, :-1])
    # hidden_states[3] is the input of the last layer (index 3): the drafter reproduces the target's logits
    expected = target(ids).logits[:, :-1, vocabulary]
    torch.testing.assert_close(out.logits, expected, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="initialization must be one of"):
        initialize_drafter(draft, target, "zeros")


def test_target_layer_start_refuses_a_narrower_drafter():
    target = tiny_model("llama")
    draft = Eagle3DraftModel.from_target(target, hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                                         head_dim=16)
    with pytest.raises(ValueError, match="shaped like the target's layers"):
        copy_target_layer(draft, target)
    wider = Eagle3DraftModel.from_target(target, intermediate_size=256)
    with pytest.raises(ValueError, match="the same intermediate_size"):
        copy_target_layer(wider, target)


def test_widened_drafter_computes_the_same_and_its_new_channels_learn(setup):
    target, samples, draft = setup
    ids = torch.tensor([samples[0]["input_ids"]])
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    feats, _ = features(ids, torch.ones_like(ids))
    narrow = draft.config.intermediate_size
    wide = widen_mlp(draft, narrow + 16, seed=3)
    assert wide.config.intermediate_size == narrow + 16 and wide.midlayer.mlp.up_proj.weight.shape[0] == narrow + 16
    with torch.no_grad():
        torch.testing.assert_close(wide(ids[:, 1:], feats[:, :-1]).logits, draft(ids[:, 1:], feats[:, :-1]).logits)
    assert wide.midlayer.mlp.gate_proj.weight[narrow:].abs().min() > 0  # drawn, not zero: they must get a gradient
    optimizer = torch.optim.SGD(wide.parameters(), lr=0.5)
    for _ in range(2):
        optimizer.zero_grad()
        wide(ids[:, 1:], feats[:, :-1]).logits.logsumexp(-1).sum().backward()
        optimizer.step()
    assert wide.midlayer.mlp.down_proj.weight[:, narrow:].abs().sum() > 0
    assert wide.midlayer.mlp.gate_proj.weight.grad[narrow:].abs().sum() > 0  # reached through the learnt columns
    assert widen_mlp(draft, narrow) is draft
    with pytest.raises(ValueError, match="narrower than the checkpoint's MLP"):
        widen_mlp(draft, narrow - 1)


def test_deepened_drafter_computes_the_same_and_its_new_layer_learns(setup):
    """A second decoder layer appended to a trained drafter: the same logits at the start (its output
    projections are zero), a gradient for those projections at once, then for the rest of the layer;
    widening a two-layer drafter widens both MLPs, again without changing the output."""
    target, samples, draft = setup
    ids = torch.tensor([samples[0]["input_ids"]])
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    feats, _ = features(ids, torch.ones_like(ids))
    deep = deepen(draft, 2, seed=3)
    assert deep.config.num_hidden_layers == 2 and list(deep.layers) == ["1"]
    with torch.no_grad():
        torch.testing.assert_close(deep(ids[:, 1:], feats[:, :-1]).logits, draft(ids[:, 1:], feats[:, :-1]).logits)
        deeper_step = deep(ids[:, 1:], feats[:, :-1]).prenorm_hidden_states
        torch.testing.assert_close(deeper_step, draft(ids[:, 1:], feats[:, :-1]).prenorm_hidden_states)
    new = deep.layers["1"]
    assert new.self_attn.q_proj.weight.abs().sum() > 0 and new.mlp.up_proj.weight.abs().sum() > 0  # drawn, not zero
    optimizer = torch.optim.SGD(deep.parameters(), lr=0.5)
    for _ in range(2):
        optimizer.zero_grad()
        deep(ids[:, 1:], feats[:, :-1]).logits.logsumexp(-1).sum().backward()
        optimizer.step()
    assert new.self_attn.o_proj.weight.abs().sum() > 0 and new.mlp.down_proj.weight.abs().sum() > 0
    assert new.self_attn.q_proj.weight.grad.abs().sum() > 0 and new.mlp.up_proj.weight.grad.abs().sum() > 0
    assert deepen(draft, 1) is draft
    with pytest.raises(ValueError, match="fewer than the checkpoint's 2 layers"):
        deepen(deep, 1)

    narrow = deep.config.intermediate_size
    wide = widen_mlp(deep.eval(), narrow + 8, seed=4)
    assert wide.layers["1"].mlp.up_proj.weight.shape[0] == narrow + 8 == wide.midlayer.mlp.up_proj.weight.shape[0]
    with torch.no_grad():
        torch.testing.assert_close(wide(ids[:, 1:], feats[:, :-1]).logits, deep(ids[:, 1:], feats[:, :-1]).logits)


def test_widen_vocabulary_keeps_the_trained_rows_and_maps_the_targets_rows_for_new_tokens(setup):
    target, samples, _ = setup
    hidden, vocab = target.config.hidden_size, target.config.vocab_size
    torch.manual_seed(2)  # more kept rows than hidden width, as in 8,192 x 576: the map is determined
    draft = Eagle3DraftModel.from_target(
        target, draft_to_target=build_draft_vocabulary(samples, hidden + 8, vocab)
    ).eval()
    narrow = draft.draft_to_target()
    vocabulary = build_draft_vocabulary(samples, hidden + 20, vocab, keep=narrow)
    assert torch.isin(narrow, vocabulary).all() and vocabulary.tolist() == sorted(set(vocabulary.tolist()))
    source = target.get_output_embeddings().weight.detach()
    mapping = torch.randn(source.shape[1], source.shape[1], generator=torch.Generator().manual_seed(0))
    trained = copy.deepcopy(draft)
    with torch.no_grad():  # a head that is exactly a linear map of the target's rows: the new rows must follow it
        trained.lm_head.weight.copy_(source[narrow] @ mapping)
    wide = widen_vocabulary(trained, target, vocabulary)
    assert wide.config.draft_vocab_size == hidden + 20 and wide.draft_to_target().tolist() == vocabulary.tolist()
    assert wide.t2d.nonzero().flatten().tolist() == vocabulary.tolist()
    kept = torch.searchsorted(vocabulary, narrow)
    torch.testing.assert_close(wide.lm_head.weight[kept], trained.lm_head.weight)  # trained rows untouched
    torch.testing.assert_close(wide.lm_head.weight, source[vocabulary] @ mapping, atol=1e-3, rtol=1e-3)
    ids = torch.tensor([samples[0]["input_ids"]])
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    feats, _ = features(ids, torch.ones_like(ids))
    with torch.no_grad():  # what the kept rows say is unchanged; the new ones add candidates
        torch.testing.assert_close(wide(ids[:, 1:], feats[:, :-1]).logits[..., kept],
                                   trained(ids[:, 1:], feats[:, :-1]).logits)
    assert widen_vocabulary(trained, target, narrow) is trained
    with pytest.raises(ValueError, match="drops tokens of the checkpoint's"):
        widen_vocabulary(trained, target, vocabulary[1:])
    with pytest.raises(ValueError, match="distinct target ids in increasing order"):
        widen_vocabulary(trained, target, vocabulary.flip(0))


def test_build_draft_vocabulary_keeps_the_given_tokens_then_the_most_frequent(setup):
    target, samples, _ = setup
    frequent = build_draft_vocabulary(samples, 3, target.config.vocab_size)
    rare = [t for t in range(target.config.vocab_size) if t not in frequent.tolist()][:2]
    grown = build_draft_vocabulary(samples, 5, target.config.vocab_size, keep=rare)
    assert set(rare) <= set(grown.tolist()) and len(set(grown.tolist()) & set(frequent.tolist())) == 3
    with pytest.raises(ValueError, match="draft_vocab_size must be in 2.."):
        build_draft_vocabulary(samples, 1, target.config.vocab_size, keep=rare)


def test_init_from_widens_the_checkpoint_and_refuses_a_new_drafters_start(setup, tmp_path):
    target, samples, draft = setup
    draft.save_pretrained(tmp_path / "drafter")
    script_args = Eagle3ScriptArguments(dataset_path="unused.jsonl", init_from=str(tmp_path / "drafter"))
    wider = Eagle3Config(output_dir=str(tmp_path / "out"), draft_intermediate_size=draft.config.intermediate_size * 2)
    built = build_drafter(script_args, wider, target, samples, None)
    assert built.config.intermediate_size == draft.config.intermediate_size * 2
    built.save_pretrained(tmp_path / "wide")  # vLLM / SGLang read the width from config.json, and so do we
    reloaded = Eagle3DraftModel.from_pretrained(tmp_path / "wide", target=target)
    assert reloaded.config.intermediate_size == draft.config.intermediate_size * 2
    assert build_drafter(
        script_args, Eagle3Config(output_dir=str(tmp_path / "out")), target, samples, None
    ).config.intermediate_size == draft.config.intermediate_size
    with pytest.raises(ValueError, match="init_from loads a trained one"):
        build_drafter(script_args, Eagle3Config(output_dir=str(tmp_path / "out"), initialization="target_layer"),
                      target, samples, None)
    larger = Eagle3Config(output_dir=str(tmp_path / "out"), draft_vocab_size=draft.config.draft_vocab_size + 4)
    grown = build_drafter(script_args, larger, target, samples, None)
    assert grown.config.draft_vocab_size == draft.config.draft_vocab_size + 4
    assert torch.isin(draft.draft_to_target(), grown.draft_to_target()).all()
    with pytest.raises(ValueError, match="draft_vocab_size must be in"):
        build_drafter(script_args, Eagle3Config(output_dir=str(tmp_path / "out"), draft_vocab_size=2), target, samples,
                      None)
    deeper = build_drafter(script_args, Eagle3Config(output_dir=str(tmp_path / "out"), draft_num_hidden_layers=2),
                           target, samples, None)
    assert deeper.config.num_hidden_layers == 2 and len(deeper.layers) == 1
    fresh = build_drafter(Eagle3ScriptArguments(dataset_path="unused.jsonl"),
                          Eagle3Config(output_dir=str(tmp_path / "out"), draft_num_hidden_layers=3, draft_vocab_size=3),
                          target, samples, None)
    assert fresh.config.num_hidden_layers == 3 and list(fresh.layers) == ["1", "2"]


def test_a_new_drafter_is_the_seeds_whatever_ran_before(setup, tmp_path):
    """The Trainer seeds after the drafter is built: a new drafter's random weights came from whatever the global
    generator held (two runs of one recipe started from different drafters)."""
    target, samples, _ = setup
    script_args = Eagle3ScriptArguments(dataset_path="unused.jsonl")

    def built(seed: int) -> dict[str, torch.Tensor]:
        torch.randn(7)  # whatever ran before moves the global generator
        args = Eagle3Config(output_dir=str(tmp_path / "out"), draft_vocab_size=4, seed=seed, report_to=[])
        return build_drafter(script_args, args, target, samples, None).state_dict()

    first, again, other = built(3), built(3), built(4)
    assert all(torch.equal(first[key], again[key]) for key in first)
    assert not torch.equal(first["fc.weight"], other["fc.weight"])


def test_streaming_with_dataloader_workers_is_refused(tmp_path):
    """Each worker would read the whole file: every conversation trained once per worker."""
    from hf_adaptive_spec.training.eagle3.script import main

    args = Eagle3Config(output_dir=str(tmp_path), dataloader_num_workers=2, report_to=[])
    with pytest.raises(ValueError, match="dataloader_num_workers=2 each worker would yield every conversation"):
        main(Eagle3ScriptArguments(dataset_path="conversations.jsonl", stream=True), args)


def test_a_held_out_set_refuses_a_drafter_it_was_not_built_for(setup):
    target, samples, draft = setup
    held_out = HeldOutSet(target, samples[:2], draft, depth=2)
    held_out.evaluate(copy.deepcopy(draft))  # the same layers and vocabulary: fine
    other_vocabulary = build_draft_vocabulary(samples, 5, target.config.vocab_size)
    other = Eagle3DraftModel.from_target(target, draft_to_target=other_vocabulary)
    with pytest.raises(ValueError, match="another draft vocabulary"):
        held_out.evaluate(other)
    deeper = tiny_model("llama", num_hidden_layers=6)
    reading = {layers: Eagle3DraftModel.from_target(deeper, draft_to_target=draft.draft_to_target(),
                                                    aux_hidden_state_layer_ids=list(layers))
               for layers in [(1, 3, 5), (2, 3, 4)]}
    with pytest.raises(ValueError, match=r"features of layers \[1, 3, 5\], but the drafter reads layers \[2, 3, 4\]"):
        HeldOutSet(deeper, samples[:2], reading[1, 3, 5], depth=2).evaluate(reading[2, 3, 4])


def test_a_bfloat16_target_is_recorded_and_starts_its_own_first_point(setup, tmp_path):
    target, samples, _ = setup
    vocabulary = build_draft_vocabulary(samples, 16, target.config.vocab_size)
    torch.manual_seed(0)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary)
    bf16_target = copy.deepcopy(target).to(torch.bfloat16)
    held_out = HeldOutSet(bf16_target, samples[:2], draft, depth=2)
    assert held_out.samples[0][1].dtype == torch.bfloat16  # the features a bfloat16 target gives
    float32_point = HeldOutPoint(step=10, input_tokens_seen=1000, first_draft_acceptance=0.1, step_accuracy=[0.1, 0.1],
                                 chain_tau=1.1, positions=5)  # saved before the dtype was recorded: float32
    callback = HeldOutCurveCallback(held_out, every_steps=2, previous=[float32_point])
    args = Eagle3Config(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, ttt_steps=2,
                        save_strategy="no", report_to=[], seed=0, disable_tqdm=True)
    Eagle3Trainer(model=draft, args=args, target_model=bf16_target, train_dataset=samples,
                  data_collator=lambda b: collate(b, pad_token_id=0), callbacks=[callback]).train()
    assert [(p.step, p.measured_in) for p in callback.points] == [(10, "float32"), (10, "bfloat16"), (12, "bfloat16")]
    assert next(draft.parameters()).dtype == torch.float32  # the drafter trained on them keeps float32 weights
    assert [p.target_dtype for p in read_curve(tmp_path)] == [None, "bfloat16", "bfloat16"]


@pytest.mark.parametrize("change", ["widened", "deepened", "unrecorded"])
def test_a_drafter_of_another_shape_starts_its_own_first_point(setup, tmp_path, change):
    """init_from + a wider MLP or another layer is a new model: its curve starts with a point before its first step,
    as does a stage continuing a curve saved before shapes were recorded."""
    target, samples, _ = setup
    vocabulary = build_draft_vocabulary(samples, 16, target.config.vocab_size)
    torch.manual_seed(0)
    trained = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary)
    grown = {"widened": lambda d: widen_mlp(d, 2 * d.config.intermediate_size), "deepened": lambda d: deepen(d, 2),
             "unrecorded": lambda d: d}[change]
    draft = grown(trained)
    earlier = HeldOutPoint(step=10, input_tokens_seen=1000, first_draft_acceptance=0.1, step_accuracy=[0.1, 0.1],
                           chain_tau=1.1, positions=5,
                           drafter_shape=None if change == "unrecorded" else drafter_shape(trained))
    callback = HeldOutCurveCallback(HeldOutSet(target, samples[:2], draft, depth=2), every_steps=2, previous=[earlier])
    args = Eagle3Config(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, ttt_steps=2,
                        save_strategy="no", report_to=[], seed=0, disable_tqdm=True)
    Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                  data_collator=lambda b: collate(b, pad_token_id=0), callbacks=[callback]).train()
    assert [p.step for p in callback.points] == [10, 10, 12]
    assert [p.drafter_shape for p in callback.points[1:]] == [drafter_shape(draft)] * 2


def test_the_scripts_held_out_set_leaves_out_conversations_that_open_with_a_training_prompt(tmp_path, caplog):
    import logging

    from hf_adaptive_spec.training.eagle3.script import heldout_callbacks

    tokenizer = make_char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'][0] + ',' + m['content'] + '.' }}{% endfor %}"
    target = tiny_model("llama")
    turns = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a {i} b {i}"}]
             for i in range(10)]
    training, held_out = tmp_path / "training.jsonl", tmp_path / "held_out.jsonl"
    training.write_text("".join(json.dumps({"conversation": t}) + "\n" for t in turns[:8]), encoding="utf-8")
    held_out.write_text("".join(json.dumps({"conversation": t}) + "\n" for t in turns[6:]), encoding="utf-8")
    samples = load_samples(tokenizer, training, 32)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=build_draft_vocabulary(samples, 8, 64))
    with caplog.at_level(logging.WARNING, logger="hf_adaptive_spec.training.eagle3.heldout"):
        held = HeldOutSet.from_jsonl(target, tokenizer, held_out, draft, 32, limit=4, depth=2, training=samples)
    assert len(held.samples) == 2 and "2 of the held-out conversations" in caplog.text and "the other 2" in caplog.text
    assert len(HeldOutSet.from_jsonl(target, tokenizer, held_out, draft, 32, limit=4, depth=2).samples) == 4
    args = Eagle3ScriptArguments(dataset_path=str(training), heldout_path=str(training), heldout_conversations=4)
    with pytest.raises(ValueError, match="Every held-out conversation of .* opens with a prompt the training data"):
        heldout_callbacks(args, target, tokenizer, draft, 32, samples)


def _stage(tmp_path, monkeypatch, name: str, data: list, held_out: list, init_from=None, stream=False):
    """A two-step script run on ``data`` with a held-out curve on ``held_out`` (conversations), from ``init_from``."""
    import hf_adaptive_spec.training.eagle3.script as script

    tokenizer = make_char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'][0] + ',' + m['content'] + '.' }}{% endfor %}"
    torch.manual_seed(0)
    target = tiny_model("llama")  # the same target in every stage
    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model", lambda name, dtype: (target, tokenizer))
    for file, conversations in ((f"{name}.jsonl", data), (f"{name}_held_out.jsonl", held_out)):
        (tmp_path / file).write_text("".join(json.dumps({"conversation": c}) + "\n" for c in conversations))
    args = script.Eagle3Config(output_dir=str(tmp_path / name), max_steps=2, per_device_train_batch_size=2, ttt_steps=2,
                               max_length=32, save_strategy="steps", save_steps=1, report_to=[], disable_tqdm=True,
                               **({} if init_from else {"draft_vocab_size": 8}))
    script_args = Eagle3ScriptArguments(
        dataset_path=str(tmp_path / f"{name}.jsonl"), heldout_path=str(tmp_path / f"{name}_held_out.jsonl"),
        heldout_conversations=len(held_out), heldout_every_steps=10, init_from=init_from, stream=stream,
    )
    return script.main(script_args, args), tokenizer


def test_a_later_stage_leaves_out_of_its_curve_the_prompts_an_earlier_stage_trained_on(tmp_path, monkeypatch,
                                                                                        caplog):
    """Each saved folder holds the prompt digests its stages trained on (trained_prompts.json); a stage from it on
    other data leaves the earlier stages' prompts out of its held-out curve too (before, only its own data's)."""
    import logging

    from hf_adaptive_spec.training.eagle3 import Lineage, prompt_digest, read_lineage

    turns = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a {i} b {i}"}]
             for i in range(10)]
    _, tokenizer = _stage(tmp_path, monkeypatch, "first", turns[:4], turns[6:])
    digests = {prompt_digest(s) for s in load_samples(tokenizer, tmp_path / "first.jsonl", 32)}
    assert len(digests) == 4 and read_lineage(tmp_path / "first") == Lineage(frozenset(digests), complete=True)
    assert read_lineage(tmp_path / "first" / "checkpoint-1") == read_lineage(tmp_path / "first")  # every checkpoint
    with caplog.at_level(logging.WARNING):
        second, _ = _stage(tmp_path, monkeypatch, "second", turns[4:6], turns[2:], init_from=str(tmp_path / "first"))
    assert [len(c.held_out.samples) for c in second._held_out_callbacks()] == [4]  # 2 and 3 (first), 4 and 5 (own)
    assert "4 of the held-out conversations" in caplog.text and "is unknown" not in caplog.text
    both = digests | {prompt_digest(s) for s in load_samples(tokenizer, tmp_path / "second.jsonl", 32)}
    assert len(both) == 6 and read_lineage(tmp_path / "second") == Lineage(frozenset(both), complete=True)


def test_a_lineage_with_an_unknown_stage_stays_incomplete_and_says_so_at_every_later_stage(tmp_path, monkeypatch,
                                                                                          caplog):
    """A drafter saved without trained_prompts.json (every stage before session 85) has unknown data: a stage from
    it filters its curve by what is known, and records its lineage as incomplete, so that a stage after it warns too
    (rather than taking the known stages for the whole lineage)."""
    import logging

    from hf_adaptive_spec.training.eagle3 import TRAINED_PROMPTS_FILE, prompt_digest, read_lineage

    turns = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a {i} b {i}"}]
             for i in range(10)]
    _stage(tmp_path, monkeypatch, "first", turns[:4], turns[6:])
    (tmp_path / "first" / TRAINED_PROMPTS_FILE).unlink()  # as saved before the file existed
    with caplog.at_level(logging.WARNING):
        second, tokenizer = _stage(tmp_path, monkeypatch, "second", turns[4:6], turns[2:],
                                   init_from=str(tmp_path / "first"))
    assert [len(c.held_out.samples) for c in second._held_out_callbacks()] == [6]  # 2 and 3 not known
    assert "the data of the stages before this one is unknown (no trained_prompts.json)" in caplog.text
    known = {prompt_digest(s) for s in load_samples(tokenizer, tmp_path / "second.jsonl", 32)}
    assert read_lineage(tmp_path / "second").prompts == known and not read_lineage(tmp_path / "second").complete
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _stage(tmp_path, monkeypatch, "third", turns[6:8], turns[2:], init_from=str(tmp_path / "second"))
    assert "the data of some stages before this one is unknown" in caplog.text
    assert not read_lineage(tmp_path / "third").complete
    (tmp_path / "first" / TRAINED_PROMPTS_FILE).write_text(json.dumps({"prompts": ["x"]}))
    with pytest.raises(ValueError, match="is not a trained-prompts file of this version"):
        read_lineage(tmp_path / "first")


def test_a_streamed_stage_records_the_prompts_of_records_appended_while_it_trains(tmp_path, monkeypatch):
    from hf_adaptive_spec.training.eagle3 import ConversationStream, prompt_digest, read_lineage

    turns = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a {i} b {i}"}]
             for i in range(6)]
    appended = json.dumps({"conversation": turns[5]}) + "\n"
    passes = ConversationStream.one_pass

    def growing(self, number):  # regeneration appends a record once the first pass began
        yield from passes(self, number)
        with open(self.path, "a") as handle:
            handle.write(appended)

    monkeypatch.setattr(ConversationStream, "one_pass", growing)
    _, tokenizer = _stage(tmp_path, monkeypatch, "streamed", turns[:2], turns[3:5], stream=True)
    trained = {prompt_digest(s) for s in load_samples(tokenizer, tmp_path / "streamed.jsonl", 32)}
    assert len(trained) == 3 and read_lineage(tmp_path / "streamed").prompts == trained  # q5 was read in pass 2


@pytest.mark.parametrize("log_level, shown", [("passive", True), ("warning", False), ("info", True)])
def test_the_curves_points_are_shown_for_the_run_only(tmp_path, log_level, shown):
    """Under the default ``--log_level passive`` the held-out points (info messages) are shown during the run and the
    training logger is as it was after it; an explicit ``--log_level warning`` hides them. The script used to raise the
    logger to INFO for good, whatever ``--log_level`` said (it leaked into a library caller's logging, and across
    tests)."""
    import logging

    from transformers.utils import logging as transformers_logging

    from hf_adaptive_spec.training.base import configure_logging
    from hf_adaptive_spec.training.eagle3.script import curve_points_shown

    package, training_logger = logging.getLogger("hf_adaptive_spec"), logging.getLogger("hf_adaptive_spec.training")
    levels = package.level, training_logger.level
    handlers = list(package.handlers), list(training_logger.handlers)
    verbosity = transformers_logging.get_verbosity()
    args = Eagle3Config(output_dir=str(tmp_path), log_level=log_level, report_to=[])
    package.setLevel(logging.WARNING)  # as an application's logging may leave it
    try:
        configure_logging(args)  # what run_training_script does before main
        during = None
        with curve_points_shown(Eagle3ScriptArguments(dataset_path="d.jsonl", heldout_path="h.jsonl"), args):
            during = training_logger.isEnabledFor(logging.INFO)
        assert during is shown
        assert training_logger.level == levels[1]  # restored, whatever it was set to during the run
        assert training_logger.handlers == handlers[1]
    finally:
        package.setLevel(levels[0])
        package.handlers[:] = handlers[0]
        transformers_logging.set_verbosity(verbosity)


def test_the_held_out_set_runs_the_target_on_the_targets_device(setup, monkeypatch):
    """The script moves the target to the training device before it builds the set, and the set fed it the ids on
    the CPU: every GPU stage with a held-out path failed before training (found by a review). Here the target sits
    on the meta device and a spy stands in for its forward."""
    import copy as copying

    import hf_adaptive_spec.training.eagle3.heldout as heldout

    target, samples, draft = setup
    seen = []

    class SpyFeatures(heldout.TargetFeatures):
        def run(self, input_ids, attention_mask, cache=None):
            seen.append({input_ids.device.type, attention_mask.device.type})
            shape = (*input_ids.shape, len(self.layer_ids) * target.config.hidden_size)
            return torch.zeros(shape), torch.zeros(*input_ids.shape, 1)  # as .cpu() of the real outputs gives

        def draft_vocab_logits(self, final_hidden):
            return torch.zeros(*final_hidden.shape[:2], draft.config.draft_vocab_size)

    monkeypatch.setattr(heldout, "TargetFeatures", SpyFeatures)
    # a target on the meta device has no values to check its logits on
    monkeypatch.setattr("hf_adaptive_spec.training.eagle3.features.check_plain_head", lambda target, final_index: None)
    on_meta = copying.deepcopy(target).to("meta")
    HeldOutSet(on_meta, samples[:2], draft, depth=2)
    assert seen == [{"meta"}, {"meta"}]


def test_a_curve_at_another_chain_depth_starts_its_own_first_point(setup, tmp_path):
    """τ(3) and τ(5) are not the same measure: a stage whose heldout_depth differs from its init_from's curve starts
    with a point of its own at the new depth (it went on from the τ(3) points with τ(5) ones)."""
    target, samples, draft, _, callback = _continuing_an_earlier_point(setup, depth=3)
    args = Eagle3Config(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, ttt_steps=2,
                        save_strategy="no", report_to=[], seed=0, disable_tqdm=True)
    Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                  data_collator=lambda b: collate(b, pad_token_id=0), callbacks=[callback]).train()
    assert [(p.step, len(p.step_accuracy)) for p in read_curve(tmp_path)] == [(10, 2), (10, 3), (12, 3)]


def test_held_out_conversations_a_stream_trains_during_the_run_are_counted_at_each_point(setup, tmp_path, caplog):
    """A stream's records appended during the run may open with a held-out prompt: every point after says how many
    of the set's conversations were trained on (the card too), with a warning when the count grows (the points
    measured trained data without a word)."""
    import logging

    target, samples, _ = setup
    vocabulary = build_draft_vocabulary(samples, 16, target.config.vocab_size)
    torch.manual_seed(0)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary)
    held_out = HeldOutSet(target, samples[:2], draft, depth=2)
    trained: set[str] = set()
    callback = HeldOutCurveCallback(held_out, every_steps=1, trained_prompts=lambda: trained)
    args = Eagle3Config(output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=2, ttt_steps=2,
                        save_strategy="no", report_to=[], seed=0, disable_tqdm=True)
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples[2:],
                            data_collator=lambda b: collate(b, pad_token_id=0), callbacks=[callback])

    class AppendHeldOut(TrainerCallback):  # the stream reads a held-out prompt's record at step 2
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1:
                trained.add(prompt_digest(samples[0]))

    trainer.add_callback(AppendHeldOut())
    with caplog.at_level(logging.WARNING):
        trainer.train()
    assert [(p.step, p.heldout_trained) for p in read_curve(tmp_path)] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert caplog.text.count("1 of the 2 held-out conversations open with a prompt this run has trained on") == 1
    assert "1 of its conversations open with a prompt this run trained on" in str(trainer.model_card())


def test_a_stage_from_a_drafter_without_a_curve_says_its_curve_counts_from_its_own_start(tmp_path, caplog):
    """Stage 1 trained without a held-out curve: stage 2's curve cannot count the steps before it, though a point's
    step counts from the drafter's initialisation; it says so instead of starting at 0 silently."""
    import logging

    from hf_adaptive_spec.training.eagle3.script import previous_curve

    (tmp_path / "stage1").mkdir()
    with caplog.at_level(logging.WARNING):
        assert previous_curve(str(tmp_path / "stage1")) == []
    assert "holds no held-out curve (heldout_curve.jsonl): this stage's curve counts its steps" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert previous_curve(None) == []
    assert not caplog.text
