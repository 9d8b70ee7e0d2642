"""An upload that cannot reach the Hub names the Hub, the cause and where the artifact is kept: it was the HTTP
client's bare ``ConnectError: [Errno -2] Name or service not known``, for an artifact's ``push_to_hub`` and for a
trainer's ``push_to_hub=True`` (after a run whose output is on disk)."""

from __future__ import annotations

import time

import pytest
import torch
from huggingface_hub import constants

import hf_adaptive_spec as hfas
from hf_adaptive_spec.hub import HubUnreachableError
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training.radar import RadarConfig, RadarDataset, RadarTrainer

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once


@pytest.fixture
def unreachable_hub(monkeypatch):
    monkeypatch.setattr(constants, "ENDPOINT", UNREACHABLE)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # offline mode has its own clear refusal


def test_an_artifact_pushed_to_an_unreachable_hub_names_the_hub_and_how_to_upload_later(unreachable_hub):
    with pytest.raises(HubUnreachableError, match=(
        r"StaticTreePolicy.push_to_hub\('org/tree'\) could not reach the Hub at http://127.0.0.1:9 \(ConnectError: "
        r".*\): check the connection .* Nothing was uploaded: save_pretrained\(folder\), then upload the folder"
    )):
        hfas.StaticTreePolicy(2, 2, 4).push_to_hub("org/tree")


def _radar_trainer(tmp_path, **settings) -> RadarTrainer:
    tree = TreeConfig(depth=2, top_k=1, total_tokens=3)
    dataset = RadarDataset(
        tree, beam_scores=torch.rand(4, 1, 1), accept_probs=torch.eye(3)[[0, 1]].expand(4, 2, 3).clone(),
        verified_tokens=torch.tensor([[2, 3]] * 4), prompt_index=torch.arange(4), position=torch.zeros(4).long(),
    )
    profile = HardwareProfile(device="cpu", dtype="float32", num_threads=1, context_length=64, verify_tokens=[1, 4],
                              verify_seconds=[1.0, 1.5], draft_step_seconds=0.1, policy_call_seconds=0.01)
    args = RadarConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, eval_strategy="no",
                       load_best_model_at_end=False, report_to=[], disable_tqdm=True, **settings)
    policy = hfas.RadarPolicy(depth=tree.depth, top_k=tree.top_k, total_tokens=tree.total_tokens)
    return RadarTrainer(model=policy, args=args, train_dataset=dataset, profile=profile)


def test_a_trainer_asked_to_push_to_an_unreachable_hub_says_so_before_training(tmp_path, unreachable_hub):
    """Trainer creates the repo when it is built, before any step."""
    with pytest.raises(HubUnreachableError, match=r"RadarTrainer \(push_to_hub=True creates the Hub repo first\) "
                                                  r"could not reach the Hub .* Nothing was trained yet"):
        _radar_trainer(tmp_path, push_to_hub=True, hub_model_id="org/radar")


def test_a_push_after_training_that_cannot_reach_the_hub_names_the_saved_folder(tmp_path, monkeypatch):
    """The Hub went away during the run: the trained policy is saved, and the error says where."""

    def repo_created(trainer, token=None, private=None):  # while the Hub was reachable
        trainer.hub_model_id, trainer.push_in_progress = "org/radar", None

    monkeypatch.setattr(RadarTrainer, "init_hf_repo", repo_created)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # huggingface_hub retries an upload 5 times, 23 s
    trainer = _radar_trainer(tmp_path, push_to_hub=True, hub_model_id="org/radar")
    monkeypatch.setattr(constants, "ENDPOINT", UNREACHABLE)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(HubUnreachableError, match=(
        rf"RadarTrainer.push_to_hub\(\) could not reach the Hub .* The trained artifact is saved in {tmp_path}: upload "
        rf"it once online \(`hf upload org/radar {tmp_path}`\)"
    )):
        trainer.train_save_and_push()
    assert (tmp_path / "model.safetensors").is_file()
