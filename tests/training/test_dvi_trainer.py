"""DVITrainer: what its card says it trained on, and a run that made no LoRA update."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model

from hf_adaptive_spec.training.dvi import DVIConfig, DVITrainer

torch.set_num_threads(1)


def _args(tmp_path, **overrides) -> DVIConfig:
    values = {"output_dir": str(tmp_path / "out"), "max_steps": 2, "exit_layer": 2, "max_new_tokens": 8,
              "save_strategy": "no", "report_to": [], "seed": 0, "disable_tqdm": True, "learning_rate": 1e-2}
    return DVIConfig(**{**values, **overrides})


def test_the_card_counts_the_prompts_drawn_not_the_steps_times_the_batch_size(tmp_path):
    """One prompt at per_device_train_batch_size 4 for 2 steps: 2 prompts drawn, not the 8 the card said."""
    trainer = DVITrainer(target_model=tiny_model("llama"), args=_args(tmp_path, per_device_train_batch_size=4),
                         train_dataset=[{"input_ids": prompt(6, seed=0)[0].tolist()}])
    trainer.train()
    assert "Trained online over 2 prompts drawn (2 LoRA updates," in trainer.card_kwargs()["description"]


@pytest.mark.parametrize("rollout, settings, cause", [
    ("replay", {}, r"no prompt gave a drafting cycle to learn from \(its answer empty or one token long"),
    ("generate", {"update_every": 1000}, r"update_every=1000 fresh records never came \(\d+ were logged\)"),
], ids=["one-token-answers", "update-every-never-reached"])
def test_a_run_that_made_no_lora_update_is_refused_before_its_adapter_is_saved(tmp_path, rollout, settings, cause):
    """Answers that give no drafting cycle (an empty answer is its end-of-turn token alone) finished with 0 updates
    and saved the untouched adapter under a card that said it trained; so did an update_every never reached."""
    record = {"input_ids": prompt(6, seed=0)[0].tolist(), **({"completion_ids": [5]} if rollout == "replay" else {})}
    trainer = DVITrainer(target_model=tiny_model("llama"), args=_args(tmp_path, rollout=rollout, **settings),
                         train_dataset=[record])
    with pytest.raises(ValueError, match=r"DVI made no LoRA update in 2 steps over 2 prompts drawn, so the adapter is "
                                         r"untouched and is not saved: " + cause):
        trainer.train_save_and_push()
    assert not (tmp_path / "out" / "adapter_model.safetensors").exists()
