"""Every trainer keeps the names its card gives as one :class:`CardNames` (the drafter trainers kept loose attributes of
their own, each building the card's dataset list itself), and the drafter cards read as they did before."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.hub.cards import CardResult, render_card
from hf_adaptive_spec.training.base import CardNames
from hf_adaptive_spec.training.dvi import DVIConfig, DVITrainer
from hf_adaptive_spec.training.eagle3 import Eagle3Config, Eagle3Trainer, collate

torch.set_num_threads(1)

NAMED = {"dataset_name": "ShareGPT", "reproduce_command": "python trainers/x.py --config x.yaml",
         "base_model": "org/the-target"}
RESULTS = (CardResult("MT-Bench", tau=2.0, speedup=1.5),)


@pytest.mark.parametrize("names", [{}, NAMED], ids=["unnamed", "named"])
def test_the_eagle3_card_names_are_card_names_and_the_card_reads_as_before(tmp_path, names: dict) -> None:
    target = tiny_model("llama")
    target.config._name_or_path = "acme/tiny-llama"  # the card's target when no base_model is given
    torch.manual_seed(1)
    trainer = Eagle3Trainer(
        model=Eagle3DraftModel.from_target(target), target_model=target,
        args=Eagle3Config(output_dir=str(tmp_path), max_steps=1, warmup_ratio=0.0, report_to=[], disable_tqdm=True),
        train_dataset=[{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1]}], data_collator=lambda b: collate(b, 0),
        **names,
    )
    target_name = names.get("base_model", "acme/tiny-llama")
    assert trainer.card_names == CardNames(target_name, None, names.get("dataset_name"), names.get("reproduce_command"))
    before = render_card(  # the fields as the trainer passed them before it kept a CardNames
        "eagle3_drafter", method="eagle3", base_model=target_name, datasets=[NAMED["dataset_name"]] if names else (),
        results=RESULTS, reproduce_command=names.get("reproduce_command"),
        description=trainer._training_description() + trainer._held_out_description(),
        paper_url="https://arxiv.org/abs/2503.01840",
    )
    assert str(trainer.model_card(RESULTS)) == str(before)


@pytest.mark.parametrize("names", [{}, NAMED], ids=["unnamed", "named"])
def test_the_dvi_card_names_are_card_names_and_the_card_reads_as_before(tmp_path, names: dict) -> None:
    trainer = DVITrainer(
        target_model=tiny_model("llama"), train_dataset=[{"input_ids": prompt(6, seed=0)[0].tolist()}],
        args=DVIConfig(output_dir=str(tmp_path), max_steps=1, exit_layer=2, report_to=[], disable_tqdm=True), **names,
    )
    assert trainer.card_names == CardNames(names.get("base_model"), None, names.get("dataset_name"),
                                           names.get("reproduce_command"))
    kwargs = {  # the fields as the trainer passed them before it kept a CardNames
        "datasets": [NAMED["dataset_name"]] if names else (), "results": (),
        "reproduce_command": names.get("reproduce_command"), "description": trainer.card_kwargs()["description"],
        **({"base_model": NAMED["base_model"]} if names else {}),
    }
    before = trainer.drafter.generate_model_card(repo_id=None, **kwargs)
    assert str(trainer.model_card()) == str(before)
