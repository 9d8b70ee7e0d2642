"""PPOW data: a conversation where no window fits is refused (trainer) or dropped (script) before training, not
when the first batch that draws it stops the run."""

from __future__ import annotations

import logging

import pytest
import torch
from datasets import Dataset
from tiny_models import tiny_model

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import collate
from hf_adaptive_spec.training.ppow import PPOWConfig, PPOWTrainer, select_prefixes, window_starts
from hf_adaptive_spec.training.ppow.script import windowed_samples
from hf_adaptive_spec.training.ppow.trainer import has_window

torch.set_num_threads(1)

LONG = {"input_ids": list(range(5, 25)), "loss_mask": [0] * 4 + [1] * 16}
#: a two-token answer (or one max_length cut to two tokens): with windows of 3 no prefix fits
SHORT = {"input_ids": list(range(5, 25)), "loss_mask": [0] * 16 + [1] * 2 + [0] * 2}


def test_has_window_is_whether_window_starts_finds_a_start():
    generator = torch.Generator().manual_seed(0)
    for _ in range(300):
        mask = (torch.rand(int(torch.randint(1, 14, (1,), generator=generator)), generator=generator) < 0.7).long()
        for window in (1, 2, 3, 5):
            assert has_window(mask.tolist(), window) == bool(window_starts(mask[None], window).any()), (mask, window)


def test_a_conversation_without_a_window_would_stop_training_at_its_batch():
    valid = window_starts(collate([LONG, SHORT], pad_token_id=0)["loss_mask"], 3)
    with pytest.raises(ValueError, match="no position where a whole window fits"):
        select_prefixes(torch.zeros(valid.shape), valid, 2, 0.0)


@pytest.mark.parametrize("as_dataset", [False, True])
def test_the_trainer_refuses_a_dataset_holding_one_before_training(tmp_path, as_dataset: bool):
    target = tiny_model("llama")
    draft = Eagle3DraftModel.from_target(target)
    args = PPOWConfig(output_dir=str(tmp_path), window_size=3, num_generations=2, num_prefixes=2, report_to=[])
    samples = [LONG, SHORT, LONG]
    data = Dataset.from_list(samples) if as_dataset else samples
    with pytest.raises(ValueError, match=r"1 of the 3 conversations of the train_dataset \(indices \[1\]\) have no 3 "):
        PPOWTrainer(model=draft, args=args, target_model=target, train_dataset=data,
                    data_collator=lambda b: collate(b, pad_token_id=0))
    with pytest.raises(ValueError, match="of the eval_dataset"):
        PPOWTrainer(model=draft, args=args, target_model=target, train_dataset=[LONG], eval_dataset={"chat": data},
                    data_collator=lambda b: collate(b, pad_token_id=0))
    PPOWTrainer(model=draft, args=args, target_model=target, train_dataset=[LONG, LONG],
                data_collator=lambda b: collate(b, pad_token_id=0))


def test_the_script_drops_them_with_a_warning(tmp_path, caplog):
    args = PPOWConfig(output_dir=str(tmp_path), window_size=3, max_length=20, report_to=[])
    with caplog.at_level(logging.WARNING, logger="hf_adaptive_spec.training.ppow.script"):
        assert windowed_samples([LONG, SHORT, LONG], args) == [LONG, LONG]
    assert "1 of 3 conversations dropped: no 3 assistant tokens in a row within max_length=20" in caplog.text
    with pytest.raises(ValueError, match="No conversation has 3 assistant tokens in a row"):
        windowed_samples([SHORT], args)
