"""A trainer resumed from a checkpoint another kind of trainer saved is refused, naming what the checkpoint holds and
what the trainer resumes (a RadarTrainer resumed from an LTD checkpoint failed with a bare AttributeError
'_keys_to_ignore_on_save' from transformers); a policy's weights are resumed strictly."""

from __future__ import annotations

import json

import pytest
import safetensors.torch
import torch
from tiny_models import prompt, tiny_model
from transformers import TrainerState

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.hub.errors import WeightsMismatchError
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.policies.ltd import LTDPolicy
from hf_adaptive_spec.policies.radar import RadarPolicy
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training.base import check_resume_settings
from hf_adaptive_spec.training.dvi import DVIConfig, DVITrainer
from hf_adaptive_spec.training.eagle3 import Eagle3Config, Eagle3Trainer, collate
from hf_adaptive_spec.training.ppow import PPOWConfig, PPOWTrainer
from hf_adaptive_spec.training.radar import RadarConfig, RadarDataset, RadarTrainer

torch.set_num_threads(1)

TREE = TreeConfig(depth=2, top_k=1, total_tokens=3)


def _radar_policy(**settings) -> RadarPolicy:
    return RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens, **settings)


def _radar_trainer(tmp_path, max_steps: int = 2, **settings) -> RadarTrainer:
    cycles = 4
    dataset = RadarDataset(
        TREE, beam_scores=torch.rand(cycles, 1, 1), accept_probs=torch.eye(3)[[0, 1]].expand(cycles, 2, 3).clone(),
        verified_tokens=torch.tensor([[2, 3]] * cycles), prompt_index=torch.arange(cycles),
        position=torch.zeros(cycles, dtype=torch.long),
    )
    profile = HardwareProfile(device="cpu", dtype="float32", num_threads=1, context_length=64, verify_tokens=[1, 4],
                              verify_seconds=[1.0, 1.5], draft_step_seconds=0.1, policy_call_seconds=0.01)
    args = RadarConfig(output_dir=str(tmp_path / "radar"), max_steps=max_steps, per_device_train_batch_size=2,
                       eval_strategy="no", load_best_model_at_end=False, report_to=[], disable_tqdm=True, **settings)
    return RadarTrainer(model=_radar_policy(), args=args, train_dataset=dataset, profile=profile)


def _eagle3_trainer(tmp_path) -> Eagle3Trainer:
    target = tiny_model("llama")
    args = Eagle3Config(output_dir=str(tmp_path / "eagle3"), max_steps=2, ttt_steps=1, report_to=[], disable_tqdm=True)
    return Eagle3Trainer(model=Eagle3DraftModel.from_target(target), args=args, target_model=target,
                         train_dataset=[{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1]}],
                         data_collator=lambda b: collate(b, 0))


def _ppow_trainer(tmp_path) -> PPOWTrainer:
    target = tiny_model("llama")
    args = PPOWConfig(output_dir=str(tmp_path / "ppow"), max_steps=2, window_size=3, num_generations=2, num_prefixes=2,
                      report_to=[], disable_tqdm=True)
    return PPOWTrainer(model=Eagle3DraftModel.from_target(target), args=args, target_model=target,
                       train_dataset=[{"input_ids": list(range(1, 9)), "loss_mask": [0, 0] + [1] * 6}],
                       data_collator=lambda b: collate(b, 0))


def _dvi_trainer(tmp_path) -> DVITrainer:
    args = DVIConfig(output_dir=str(tmp_path / "dvi"), max_steps=2, exit_layer=2, report_to=[], disable_tqdm=True)
    return DVITrainer(target_model=tiny_model("llama"), args=args,
                      train_dataset=[{"input_ids": prompt(6, seed=0)[0].tolist()}])


OTHER_KINDS = [
    (_radar_trainer, LTDPolicy, r"holds a 'hf_adaptive_spec.policy.ltd' artifact \(LTDPolicy\), where RadarTrainer "
     r"resumes a 'hf_adaptive_spec.policy.radar' artifact \(RadarPolicy\)"),
    (_eagle3_trainer, _radar_policy, r"holds a 'hf_adaptive_spec.policy.radar' artifact \(RadarPolicy\), where "
     r"Eagle3Trainer resumes an EAGLE-3 drafter in SpecForge's layout \(no artifact_type\)"),
    (_dvi_trainer, LTDPolicy, r"holds a 'hf_adaptive_spec.policy.ltd' artifact \(LTDPolicy\), where DVITrainer "
     r"resumes a 'hf_adaptive_spec.drafter.dvi' artifact \(DVIDrafter\)"),
]


@pytest.mark.parametrize("trainer, saved, message", OTHER_KINDS, ids=["radar-from-ltd", "eagle3-from-radar",
                                                                    "dvi-from-ltd"])
def test_a_checkpoint_another_kind_of_trainer_saved_is_refused_naming_both(tmp_path, trainer, saved, message):
    saved().save_pretrained(tmp_path / "checkpoint-2")
    with pytest.raises(ValueError, match=message + ": another kind of trainer saved it. Resume a checkpoint-N folder"):
        trainer(tmp_path).train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))


def test_a_policy_checkpoint_resumes_strictly(tmp_path):
    """A RADAR run resumes its own checkpoint; one whose weights file lacks a tensor is refused naming it, where
    Trainer's loader, made for transformers models, loaded the rest and failed with a bare AttributeError."""
    _radar_trainer(tmp_path, max_steps=1, save_strategy="steps", save_steps=1).train()
    checkpoint = tmp_path / "radar" / "checkpoint-1"
    assert _radar_trainer(tmp_path, max_steps=2).train(resume_from_checkpoint=str(checkpoint)).global_step == 2
    weights = safetensors.torch.load_file(checkpoint / "model.safetensors")
    dropped = sorted(weights)[0]
    safetensors.torch.save_file({k: v for k, v in weights.items() if k != dropped}, checkpoint / "model.safetensors")
    with pytest.raises(WeightsMismatchError, match=f"does not match RadarPolicy: missing keys \\['{dropped}'\\]"):
        _radar_trainer(tmp_path, max_steps=2).train(resume_from_checkpoint=str(checkpoint))


@pytest.mark.parametrize("saver, resumer", [(_eagle3_trainer, _ppow_trainer), (_ppow_trainer, _eagle3_trainer)],
                         ids=["ppow-from-eagle3", "eagle3-from-ppow"])
def test_a_checkpoint_of_the_same_artifact_another_trainer_saved_is_refused_naming_it(tmp_path, saver, resumer):
    """EAGLE-3 and PPOW both save an EAGLE-3 drafter in SpecForge's layout, so the artifact check cannot tell their
    checkpoints apart: with the same learning rate one resumed the other's optimizer, schedule and step silently.
    training_config.json names the trainer that saved it; one saved before it did is not compared."""
    saved_by = saver(tmp_path)
    checkpoint = tmp_path / "checkpoint-2"
    saved_by.save_model(str(checkpoint))
    resuming = resumer(tmp_path)
    resuming.args.learning_rate = saved_by.args.learning_rate
    saver_kind, resumer_kind = saved_by.kind(), resuming.kind()
    with pytest.raises(ValueError, match=f"was saved by a '{saver_kind}' trainer .*, and this run is a "
                                         f"'{resumer_kind}' trainer's: another trainer's weights, optimizer and "
                                         "schedule are not this run's"):
        resuming.train(resume_from_checkpoint=str(checkpoint))

    class LoggingTrainer(type(saved_by)):  # a user's subclass of the trainer that saved it resumes it
        pass

    check_resume_settings(saved_by.args, str(checkpoint), LoggingTrainer.trainer_kind)
    config = checkpoint / "training_config.json"
    stored = json.loads(config.read_text())
    assert stored.pop("hf_adaptive_spec_trainer") == saver_kind
    config.write_text(json.dumps(stored))
    check_resume_settings(saved_by.args, str(checkpoint), resumer_kind)  # saved before the kind was kept


@pytest.mark.usefixtures("placeholder_inputs")
def test_a_script_resuming_another_trainers_output_dir_names_both_kinds(tmp_path):
    """Through the scripts, the script-argument comparison ran first and refused the EAGLE-3 folder a PPOW run was
    pointed at by listing the arguments that differ (every one of another script's), never saying another kind of
    trainer wrote the folder: the kind is checked first, by the one check the trainers run."""
    from hf_adaptive_spec.training.base import run_training_script
    from hf_adaptive_spec.training.eagle3.script import make_parser as eagle3_parser
    from hf_adaptive_spec.training.ppow.script import run as run_ppow_script

    out = tmp_path / "eagle3"
    eagle3_argv = ["--output_dir", str(out), "--dataset_path", "data.jsonl"]
    run_training_script(eagle3_parser(), lambda *_: _eagle3_trainer(tmp_path).save_model(str(out / "checkpoint-2")),
                        eagle3_argv)
    TrainerState().save_to_json(str(out / "checkpoint-2" / "trainer_state.json"))  # what makes it a checkpoint
    eagle3_arguments = (out / "script_args.json").read_text()
    resumed = ["--resume_from_checkpoint", "true"]
    with pytest.raises(ValueError) as refused:
        run_ppow_script(["--output_dir", str(out), "--drafter_name_or_path", str(out / "checkpoint-2"),
                         "--dataset_path", "data.jsonl", *resumed])
    message = str(refused.value)
    assert f"resume_from_checkpoint={out / 'checkpoint-2'} was saved by a 'eagle3' trainer" in message
    assert "and this run is a 'ppow' trainer's: another trainer's weights, optimizer and schedule" in message
    assert ("Give this 'ppow' run another --output_dir (or a checkpoint a 'ppow' run saved), or resume that folder "
            "with the 'eagle3' script (trainers/eagle3.py, or `hf-adaptive-spec train eagle3`)") in message
    assert "script arguments" not in message
    assert (out / "script_args.json").read_text() == eagle3_arguments  # the refused run wrote nothing there
    ran = []
    run_training_script(eagle3_parser(), lambda *_: ran.append(1), [*eagle3_argv, *resumed], Eagle3Trainer)
    assert ran == [1]  # the script of the kind that saved it resumes it
