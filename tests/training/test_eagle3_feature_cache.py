"""The EAGLE-3 trainer's feature cache: later passes read what the first computed, bounded, for one target only."""

from __future__ import annotations

import copy
import gc
import os
import types

import pytest
import torch
from tiny_models import prompt, tiny_model

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.base import check_resume_settings
from hf_adaptive_spec.training.eagle3 import (
    Eagle3Config,
    Eagle3Trainer,
    FeatureCache,
    TargetFeatures,
    TTTBatch,
    collate,
    target_signature,
    ttt_loss,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup():
    target = tiny_model("llama")
    torch.manual_seed(3)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=torch.arange(0, 96, 2), initializer_range=0.2)
    samples = []
    for seed, length in enumerate((9, 14, 6, 11)):
        ids = prompt(length, seed=seed)[0].tolist()
        samples.append({"input_ids": ids, "loss_mask": [0, 0] + [1] * (length - 2)})
    return target, draft, samples


def _features(target, draft, cache=None):
    features = TargetFeatures(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    features.cache = cache
    return features


def _cache(path, target, draft, max_gigabytes=1.0):
    return FeatureCache(path, max_gigabytes, target_signature(target, draft.config.aux_hidden_state_layer_ids))


def _loss_and_grads(draft, batch, features, logits):
    loss, _, _ = ttt_loss(draft, TTTBatch(batch["input_ids"], features, logits, batch["loss_mask"]), steps=3)
    return loss, torch.autograd.grad(loss, [p for p in draft.parameters() if p.requires_grad])


def test_a_batch_read_from_the_cache_trains_the_drafter_as_the_target_computed_it(setup, tmp_path):
    """The second pass reads every row (the target does not run) and gives the loss and gradients of running it."""
    target, draft, samples = setup
    batch = collate(samples[:3], pad_token_id=0)
    reference = _features(target, draft)(batch["input_ids"], batch["attention_mask"])
    cached = _features(target, draft, _cache(tmp_path, target, draft))
    first = cached(batch["input_ids"], batch["attention_mask"])
    cached.run = None  # a second pass that ran the target would fail here
    second = cached(batch["input_ids"], batch["attention_mask"])
    assert cached.cache.hits == 3 and cached.cache.misses == 3
    lengths = batch["attention_mask"].sum(1)
    for got in (first, second):
        for row, length in enumerate(lengths):
            for mine, theirs in zip(got, reference):
                assert torch.equal(mine[row, :length], theirs[row, :length])
    loss, grads = _loss_and_grads(draft, batch, *second)
    reference_loss, reference_grads = _loss_and_grads(draft, batch, *reference)
    torch.testing.assert_close(loss, reference_loss, rtol=1e-6, atol=0)
    for mine, theirs in zip(grads, reference_grads):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-7)


def test_a_mixed_batch_runs_the_target_on_its_missing_rows_only(setup, tmp_path):
    target, draft, samples = setup
    cached = _features(target, draft, _cache(tmp_path, target, draft))
    one = collate(samples[1:2], pad_token_id=0)
    cached(one["input_ids"], one["attention_mask"])
    shapes, run = [], cached.run
    cached.run = lambda ids, mask: (shapes.append(tuple(ids.shape)), run(ids, mask))[1]
    batch = collate(samples[:3], pad_token_id=0)
    features, logits = cached(batch["input_ids"], batch["attention_mask"])
    assert shapes == [(2, 9)]  # rows 0 and 2 (9 and 6 tokens), cut to the longer; row 1 (14 tokens) was read
    reference_features, reference_logits = _features(target, draft)(batch["input_ids"], batch["attention_mask"])
    for row, length in enumerate(batch["attention_mask"].sum(1)):  # features up to ~90: a batch's width moves them 6e-5
        torch.testing.assert_close(features[row, :length], reference_features[row, :length], rtol=1e-5, atol=2e-4)
        torch.testing.assert_close(logits[row, :length], reference_logits[row, :length], rtol=1e-5, atol=2e-4)


def test_the_cache_stores_up_to_its_bound_and_is_read_again_after_a_restart(setup, tmp_path):
    target, draft, _ = setup
    folder = tmp_path / "bounded"
    cache = _cache(folder, target, draft)
    size = (14 * cache.row_bytes + 1) / 2**30
    cache.close()
    bounded = _cache(folder, target, draft, max_gigabytes=size)
    rows = {length: torch.randn(length, bounded.width) for length in (9, 6, 14)}
    assert bounded.put(list(range(9)), rows[9]) and not bounded.put(list(range(6)), rows[6])  # 15 rows > 14
    assert bounded.refused == 1 and bounded.get(list(range(6))) is None
    with pytest.raises(ValueError, match=rf"\[6, {bounded.width}\] torch.float32, got \[9, {bounded.width}\]"):
        bounded.put(list(range(6)), rows[9])
    bounded.close()
    reopened = _cache(folder, target, draft, max_gigabytes=size)
    assert torch.equal(reopened.get(list(range(9))), rows[9])
    assert reopened.get(list(range(1, 10))) is None  # another conversation of the same length is not that row
    reopened.close()


def test_a_folder_is_held_by_one_open_cache_at_a_time(setup, tmp_path):
    target, draft, _ = setup
    first = _cache(tmp_path, target, draft)
    with pytest.raises(RuntimeError, match="open in another process.*its own feature_cache_dir"):
        _cache(tmp_path, target, draft)
    first.close()
    _cache(tmp_path, target, draft).close()


def test_opening_the_cache_drops_what_a_crash_left_unfinished(setup, tmp_path):
    """An index line cut mid-write, an index line whose bytes never reached the disk, bytes without an index line:
    none may later serve another conversation's row."""
    target, draft, _ = setup
    cache = _cache(tmp_path, target, draft)
    rows = [torch.randn(length, cache.width) for length in (5, 7, 3)]
    assert cache.put(list(range(5)), rows[0]) and cache.put(list(range(7)), rows[1])
    cache.close()
    with open(tmp_path / "index.jsonl", "a") as index:
        index.write('{"key": "cut mid-wri')
    os.truncate(tmp_path / "features.bin", 5 * cache.row_bytes + 10)  # the second row's bytes lost, 10 bytes left over
    cache = _cache(tmp_path, target, draft)
    assert torch.equal(cache.get(list(range(5))), rows[0]) and cache.get(list(range(7))) is None
    assert cache.put(list(range(3)), rows[2]) and cache.size == 8 * cache.row_bytes
    cache.close()
    cache = _cache(tmp_path, target, draft)  # the lost row's old line must not now point into the new row's bytes
    assert cache.get(list(range(7))) is None and torch.equal(cache.get(list(range(3))), rows[2])
    cache.close()


def test_a_manifest_write_cut_by_a_crash_leaves_a_folder_that_opens(setup, tmp_path, crash_mid_write):
    """A crash while a new folder's manifest was written left half a JSON file: every later open failed on it with a
    bare JSONDecodeError."""
    target, draft, _ = setup
    with crash_mid_write():
        _cache(tmp_path, target, draft)
    gc.collect()  # the interrupted cache's lock file
    _cache(tmp_path, target, draft).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["features.bin", "lock", "manifest.json"]


def test_a_bfloat16_target_s_rows_come_back_bit_for_bit(setup, tmp_path):
    target, draft, _ = setup
    bfloat16 = copy.deepcopy(target).to(torch.bfloat16)
    cache = _cache(tmp_path, bfloat16, draft)
    row = torch.randn(6, cache.width).to(torch.bfloat16)
    assert cache.dtype == torch.bfloat16 and cache.row_bytes == 2 * cache.width and cache.put(list(range(6)), row)
    assert torch.equal(cache.get(list(range(6))), row)


def _changed(target, change):
    other = copy.deepcopy(target)
    with torch.no_grad():
        change(other)
    return other


def test_a_cache_written_for_another_target_or_other_layers_is_refused(setup, tmp_path):
    target, draft, _ = setup
    _cache(tmp_path, target, draft).close()
    layer_ids = draft.config.aux_hidden_state_layer_ids
    others = {
        "a whole weight": _changed(target, lambda m: m.model.layers[1].mlp.down_proj.weight.mul_(1.01)),
        "a single weight value": _changed(target, lambda m: m.model.embed_tokens.weight[7, 1].add_(1e-3)),
        "the configuration": _changed(target, lambda m: setattr(m.config, "rms_norm_eps", 1e-3)),
    }
    for other in others.values():
        with pytest.raises(ValueError, match="another target setup.*target.*new folder"):
            _cache(tmp_path, other, draft)
    with pytest.raises(ValueError, match="layer_ids"):
        FeatureCache(tmp_path, 1.0, target_signature(target, [0, 1, 2]))
    with pytest.raises(ValueError, match="dtype"):
        FeatureCache(tmp_path, 1.0, target_signature(copy.deepcopy(target).to(torch.bfloat16), layer_ids))
    _cache(tmp_path, copy.deepcopy(target), draft).close()  # the same target, another object: accepted


def test_a_left_padded_batch_is_refused(setup, tmp_path):
    target, draft, samples = setup
    batch = collate(samples[:2], pad_token_id=0)
    with pytest.raises(ValueError, match="pad batches on the right"):
        _features(target, draft, _cache(tmp_path, target, draft))(batch["input_ids"], batch["attention_mask"].flip(1))


def _train(target, draft, samples, output_dir, **cache_args):
    args = Eagle3Config(
        output_dir=str(output_dir), num_train_epochs=3, per_device_train_batch_size=2, learning_rate=3e-3,
        warmup_ratio=0.0, ttt_steps=2, logging_steps=2, save_strategy="no", report_to=[], seed=0, disable_tqdm=True,
        **cache_args,
    )
    trainer = Eagle3Trainer(model=copy.deepcopy(draft), args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=0))
    trainer.train()
    return trainer


def test_the_trainer_reads_later_epochs_from_the_cache_and_trains_the_same_drafter(setup, tmp_path):
    target, draft, samples = setup
    plain = _train(target, draft, samples, tmp_path / "plain")
    cached = _train(target, draft, samples, tmp_path / "cached", feature_cache_dir=str(tmp_path / "cache"))
    rates = [entry["feature_cache_hit_rate"] for entry in cached.state.log_history if "feature_cache_hit_rate" in entry]
    assert rates == [0.0, 1.0, 1.0]  # one log line per epoch of 2 batches: the first epoch computes, the others read
    assert cached.target_features.cache.misses == 4 and cached.target_features.cache.hits == 8
    for (name, mine), theirs in zip(cached.model.named_parameters(), plain.model.parameters()):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6, msg=name)


def test_the_config_refuses_a_bound_that_stores_nothing(tmp_path):
    with pytest.raises(ValueError, match="feature_cache_max_gb must be positive.*leave feature_cache_dir unset"):
        Eagle3Config(output_dir=str(tmp_path), report_to=[], feature_cache_dir=str(tmp_path), feature_cache_max_gb=0)


def test_evaluation_runs_the_target_and_leaves_the_cache_alone(setup, tmp_path):
    target, draft, samples = setup
    trainer = _train(target, draft, samples, tmp_path / "run", feature_cache_dir=str(tmp_path / "cache"))
    cache = trainer.target_features.cache
    counts = (cache.hits, cache.misses, len(cache.index))
    metrics = trainer.evaluate(eval_dataset=samples[:2] + [{**samples[2], "input_ids": samples[2]["input_ids"][::-1]}])
    assert (cache.hits, cache.misses, len(cache.index)) == counts and "eval_feature_cache_hit_rate" not in metrics


def test_a_run_of_several_processes_is_refused():
    stub = types.SimpleNamespace(args=types.SimpleNamespace(feature_cache_dir="/unused", world_size=2))
    with pytest.raises(ValueError, match="works in one process, and this run has 2.*Train in one process"):
        Eagle3Trainer._feature_cache(stub, None, [])


def test_a_checkpoint_resumes_with_a_cache_added_but_not_with_another_rate(tmp_path):
    stored = Eagle3Config(output_dir=str(tmp_path), report_to=[])
    (tmp_path / "training_config.json").write_text(stored.to_json_string())
    check_resume_settings(Eagle3Config(output_dir=str(tmp_path), report_to=[], feature_cache_dir="/tmp/c",
                                       feature_cache_max_gb=8), str(tmp_path))
    with pytest.raises(ValueError, match="learning_rate"):
        check_resume_settings(Eagle3Config(output_dir=str(tmp_path), report_to=[], learning_rate=1.0), str(tmp_path))
