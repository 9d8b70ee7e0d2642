"""What a resume continues: the order a resumed epoch draws its data in, the checkpoint a TRL-style resume from Python
names to the callbacks, and a checkpoint-N folder rather than a saved model."""

from __future__ import annotations

import logging

import pytest
import torch
from tiny_models import tiny_model

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.base import check_resume_settings
from hf_adaptive_spec.training.eagle3 import (
    Eagle3Config,
    Eagle3Trainer,
    HeldOutCurveCallback,
    HeldOutSet,
    build_draft_vocabulary,
    collate,
    read_curve,
)
from hf_adaptive_spec.training.resume import check_resumed_script_args

from .test_eagle3_training import _samples

torch.set_num_threads(1)


def _store_training_config(checkpoint) -> None:
    """A checkpoint's training_config.json, of a run with the default settings."""
    stored = Eagle3Config(output_dir=str(checkpoint), report_to=[])
    (checkpoint / "training_config.json").write_text(stored.to_json_string())


@pytest.mark.parametrize("changed, stored", [
    ({"data_seed": 123}, "None"), ({"train_sampling_strategy": "sequential"}, "'random'"),
    ({"dataloader_drop_last": True}, "False"), ({"length_column_name": "tokens"}, "'length'"),
])
def test_a_resume_that_would_draw_the_epoch_in_another_order_is_refused(tmp_path, changed, stored):
    """Trainer skips the batches the checkpoint trained in the order these settings give: with another data_seed the
    resumed epoch of 8 conversations trained 6 distinct ones, accepted without a word."""
    _store_training_config(tmp_path)
    (name, value), = changed.items()
    with pytest.raises(ValueError, match=rf"other settings \({name}: {stored} -> {value!r}\)"):
        check_resume_settings(Eagle3Config(output_dir=str(tmp_path), report_to=[], **changed), str(tmp_path))


def test_a_resume_in_another_precision_is_accepted_with_a_warning(tmp_path, caplog):
    """bf16 changes the steps' numerics, not the data or the schedule: a run moved to a machine without bf16 may
    resume, and is told."""
    _store_training_config(tmp_path)
    with caplog.at_level(logging.WARNING, logger="hf_adaptive_spec.training.resume"):
        check_resume_settings(Eagle3Config(output_dir=str(tmp_path), report_to=[], bf16=True), str(tmp_path))
    assert "trained in another precision (bf16: False -> True)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_adaptive_spec.training.resume"):
        check_resume_settings(Eagle3Config(output_dir=str(tmp_path), report_to=[]), str(tmp_path))
    assert "precision" not in caplog.text


def _curve_run(target, samples, output_dir, resume=None) -> tuple[Eagle3Trainer, list[int]]:
    torch.manual_seed(0)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=build_draft_vocabulary(samples, 16, 96))
    callback = HeldOutCurveCallback(HeldOutSet(target, samples[:2], draft, depth=2), every_steps=1)
    args = Eagle3Config(output_dir=str(output_dir), max_steps=4, per_device_train_batch_size=2, ttt_steps=1,
                        warmup_ratio=0.0, save_strategy="steps", save_steps=2, report_to=[], disable_tqdm=True)
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=0), callbacks=[callback])
    trainer.train(resume_from_checkpoint=resume)
    return trainer, [p.step for p in read_curve(output_dir)]


def test_a_resume_from_python_into_another_output_dir_keeps_the_checkpoints_curve(tmp_path):
    """trainer.train(resume_from_checkpoint=PATH) with another output_dir: the curve looked for the checkpoint in the
    new output_dir (args.resume_from_checkpoint unset) and lost the points before it ([2, 3, 4])."""
    target = tiny_model("llama")
    samples = _samples(target, count=6, length=20)
    _, first = _curve_run(target, samples, tmp_path / "a")
    assert first == [0, 1, 2, 3, 4]
    resumed, steps = _curve_run(target, samples, tmp_path / "b", resume=str(tmp_path / "a" / "checkpoint-2"))
    assert steps == [0, 1, 2, 3, 4]
    assert resumed.args.resume_from_checkpoint is None  # the caller's config is left as it was given


def _trainer(target, output_dir) -> Eagle3Trainer:
    args = Eagle3Config(output_dir=str(output_dir), max_steps=2, ttt_steps=1, report_to=[], disable_tqdm=True)
    return Eagle3Trainer(model=Eagle3DraftModel.from_target(target), args=args, target_model=target,
                         train_dataset=[{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1]}],
                         data_collator=lambda b: collate(b, 0))


def test_a_saved_model_folder_is_refused_as_a_checkpoint_naming_init_from(tmp_path):
    """A finished run's output_dir (or its stable folder) holds the drafter without trainer_state.json: resuming it
    failed with a bare FileNotFoundError from transformers, after the target loaded; the script refuses it first."""
    target = tiny_model("llama")
    trainer = _trainer(target, tmp_path / "run")
    trainer.save_model(str(tmp_path / "run"))
    message = r"holds a saved model and no trainer_state.json: it is no checkpoint-N folder.*\(init_from"
    with pytest.raises(ValueError, match=message):
        _trainer(target, tmp_path / "again").train(resume_from_checkpoint=str(tmp_path / "run"))
    args = Eagle3Config(output_dir=str(tmp_path / "again"), report_to=[], resume_from_checkpoint=str(tmp_path / "run"))
    with pytest.raises(ValueError, match=message):  # from the script's arguments, before any model loads
        check_resumed_script_args(object(), args)
    args.resume_from_checkpoint = str(tmp_path / "missing")
    with pytest.raises(ValueError, match="missing is not a folder: pass a checkpoint-N folder"):
        check_resumed_script_args(object(), args)
