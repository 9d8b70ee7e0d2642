"""What the trainers refuse at construction rather than train silently wrong: a drafter built for another target, data
with nothing to train, arguments they would ignore or that collide with their own, a config that is not theirs, a
half precision applied in part; an evaluation's log holds its own batches' metrics, and a push that cannot reach the
Hub names it."""

from __future__ import annotations

import time

import pytest
import tiny_models
import torch
from huggingface_hub import constants
from tiny_models import tiny_model
from transformers import LlamaConfig, LlamaForCausalLM, TrainingArguments

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.hub import HubUnreachableError
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.policies.radar import RadarPolicy
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training.dvi import DVIConfig, DVITrainer
from hf_adaptive_spec.training.eagle3 import Eagle3Config, Eagle3Trainer, collate
from hf_adaptive_spec.training.ltd import LTDConfig, LTDTrainer
from hf_adaptive_spec.training.ppow import PPOWConfig, PPOWTrainer
from hf_adaptive_spec.training.radar import RadarConfig, RadarDataset, RadarTrainer
from hf_adaptive_spec.training.resps import ReSpSConfig, ReSpSTrainer

torch.set_num_threads(1)

TREE = TreeConfig(depth=2, top_k=1, total_tokens=3)
CONVERSATIONS = [{"input_ids": list(range(1, 13)), "loss_mask": [0, 0] + [1] * 10}] * 4


def _collate(batch):
    return collate(batch, 0)


def _eagle3_args(tmp_path, **settings) -> Eagle3Config:
    fields = dict(output_dir=str(tmp_path / "eagle3"), max_steps=2, ttt_steps=1, per_device_train_batch_size=2,
                  warmup_ratio=0.0, save_strategy="no", report_to=[], disable_tqdm=True)
    return Eagle3Config(**{**fields, **settings})


def _ppow_args(tmp_path) -> PPOWConfig:
    return PPOWConfig(output_dir=str(tmp_path / "ppow"), max_steps=1, window_size=3, num_generations=2,
                      num_prefixes=2, warmup_ratio=0.0, report_to=[], disable_tqdm=True)


def _radar_trainer(tmp_path, **kwargs) -> RadarTrainer:
    dataset = RadarDataset(
        TREE, beam_scores=torch.rand(4, 1, 1), accept_probs=torch.eye(3)[[0, 1]].expand(4, 2, 3).clone(),
        verified_tokens=torch.tensor([[2, 3]] * 4), prompt_index=torch.arange(4), position=torch.zeros(4).long(),
    )
    profile = HardwareProfile(device="cpu", dtype="float32", num_threads=1, context_length=64, verify_tokens=[1, 4],
                              verify_seconds=[1.0, 1.5], draft_step_seconds=0.1, policy_call_seconds=0.01)
    args = RadarConfig(output_dir=str(tmp_path / "radar"), max_steps=1, per_device_train_batch_size=2,
                       eval_strategy="no", load_best_model_at_end=False, report_to=[], disable_tqdm=True)
    policy = RadarPolicy(depth=TREE.depth, top_k=TREE.top_k, total_tokens=TREE.total_tokens)
    return RadarTrainer(model=policy, args=args, train_dataset=dataset, profile=profile, eval_dataset=dataset,
                        **kwargs)


# -- A1: the drafter must fit the target it trains against ----------------------------------------------------------


def _wider_vocabulary_target():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**{**tiny_models._COMMON, "vocab_size": 128, "num_hidden_layers": 4})).eval()


@pytest.mark.parametrize("trainer", ["eagle3", "ppow"])
@pytest.mark.parametrize("other_target, message", [
    (lambda: tiny_model("llama", num_hidden_layers=6),
     r"built for a 4-layer target; the target has 6 layers.*ignore_target_mismatch=True"),
    (_wider_vocabulary_target, r"Vocabulary mismatch: the drafter's vocab_size is 96, the target's is 128"),
], ids=["depth", "vocabulary"])
def test_a_drafter_built_for_another_target_is_refused(tmp_path, trainer, other_target, message):
    """It trained, then the drafter it saved refused to load on the target it trained with."""
    draft = Eagle3DraftModel.from_target(tiny_model("llama"))
    target = other_target()
    args = _eagle3_args(tmp_path) if trainer == "eagle3" else _ppow_args(tmp_path)
    trainer_class = Eagle3Trainer if trainer == "eagle3" else PPOWTrainer
    with pytest.raises(ValueError, match=rf"{trainer_class.__name__}: the drafter does not fit target_model\. "
                                         rf".*{message}"):
        trainer_class(model=draft, args=args, target_model=target, train_dataset=CONVERSATIONS,
                      data_collator=_collate)


def test_a_drafter_loaded_with_ignore_target_mismatch_trains_on_the_new_target(tmp_path):
    Eagle3DraftModel.from_target(tiny_model("llama")).save_pretrained(tmp_path / "four")
    target = tiny_model("llama", num_hidden_layers=6)
    draft = Eagle3DraftModel.from_pretrained(tmp_path / "four", target=target, ignore_target_mismatch=True)
    Eagle3Trainer(model=draft, args=_eagle3_args(tmp_path), target_model=target, train_dataset=CONVERSATIONS,
                  data_collator=_collate)


# -- A2: an evaluation logs its own batches, training keeps its own -------------------------------------------------


def test_an_evaluation_during_training_logs_its_own_batches_and_training_keeps_its_own(tmp_path):
    """The evaluation's log averaged the training batches since the last log in as eval_*, and the next training log
    lost them."""
    target = tiny_model("llama")
    args = _eagle3_args(tmp_path, max_steps=4, logging_steps=4, eval_strategy="steps", eval_steps=2,
                        per_device_eval_batch_size=4)
    trainer = Eagle3Trainer(model=Eagle3DraftModel.from_target(target), args=args, target_model=target,
                            train_dataset=CONVERSATIONS, eval_dataset=CONVERSATIONS, data_collator=_collate)
    trainer.train()
    evaluations = [log for log in trainer.state.log_history if "eval_loss" in log]
    trainings = [log for log in trainer.state.log_history if "loss" in log]
    assert len(evaluations) == 2 and len(trainings) == 1
    for log in evaluations:  # one step of the training-time test: the loss is step 0's, of the eval batch alone
        assert log["eval_loss_step0"] == pytest.approx(log["eval_loss"], rel=1e-5)
    assert "loss_step0" in trainings[0] and "acc_step0" in trainings[0]


def test_a_replaying_evaluation_leaves_the_training_metrics_to_the_training_log(tmp_path):
    """RADAR's (and LTD's, Re-SpS's) own evaluate logs through the same store as Trainer's evaluation."""
    trainer = _radar_trainer(tmp_path)
    trainer.step_metrics["return"].append(2.0)
    metrics = trainer.evaluate()
    assert "eval_return" not in trainer.state.log_history[-1]
    assert trainer.state.log_history[-1]["eval_tokens_per_second"] == metrics["eval_tokens_per_second"]
    trainer.log({"loss": 1.0})
    assert trainer.state.log_history[-1]["return"] == 2.0


# -- A3: data with nothing to train ---------------------------------------------------------------------------------


@pytest.mark.parametrize("samples, message", [
    ([{"input_ids": list(range(1, 9)), "loss_mask": [0] * 8}] * 4, r"Every loss_mask of the training data is 0"),
    ([{"input_ids": list(range(1, 9))}] * 4, r"Conversation 0 of the training data has no loss_mask"),
], ids=["all-zero", "missing"])
def test_data_with_no_answer_token_to_train_is_refused(tmp_path, samples, message):
    """It trained at loss 0, changed nothing, and its card said it trained."""
    target = tiny_model("llama")
    with pytest.raises(ValueError, match=message):
        Eagle3Trainer(model=Eagle3DraftModel.from_target(target), args=_eagle3_args(tmp_path), target_model=target,
                      train_dataset=samples, data_collator=_collate)


# -- A4, B8: arguments a trainer would ignore, or that collide with its own -------------------------------------------


def _ltd(tmp_path, **kwargs):
    LTDTrainer(None, LTDConfig(output_dir=str(tmp_path), report_to=[]), None, **kwargs)


def _resps(tmp_path, **kwargs):
    ReSpSTrainer(None, ReSpSConfig(output_dir=str(tmp_path), report_to=[]), None, **kwargs)


def _dvi(tmp_path, **kwargs):
    DVITrainer(None, DVIConfig(output_dir=str(tmp_path), report_to=[]), [], **kwargs)


def _radar(tmp_path, **kwargs):
    _radar_trainer(tmp_path, **kwargs)


REFUSED = [
    (_ltd, "train_dataset", r"LTDTrainer does not take train_dataset= \(it trains on replays of environment="),
    (_ltd, "eval_dataset", r"LTDTrainer does not take eval_dataset= \(pass the held-out replay environment as "
     r"eval_environment="),
    (_ltd, "data_collator", r"LTDTrainer does not take data_collator= \(.*minibatch_size"),
    (_ltd, "compute_metrics", r"LTDTrainer does not take compute_metrics= \(evaluate\(\) replays"),
    (_radar, "compute_metrics", r"RadarTrainer does not take compute_metrics= \(evaluate\(\) scores"),
    (_resps, "model", r"ReSpSTrainer does not take model= \(pass the ReSpSPolicy to train as policy=\)"),
    (_resps, "data_collator", r"ReSpSTrainer does not take data_collator= \(.*per_device_train_batch_size"),
    (_resps, "compute_metrics", r"ReSpSTrainer does not take compute_metrics= \(evaluate\(\) replays"),
    (_dvi, "model", r"DVITrainer does not take model= \(it trains the LoRA head of drafter="),
    (_dvi, "data_collator", r"DVITrainer does not take data_collator= \(it batches the prompts itself"),
    (_dvi, "optimizers", r"DVITrainer does not take optimizers= \(the LoRA head steps with the online updater"),
    (_dvi, "eval_dataset", r"DVITrainer does not take eval_dataset= \(it has no evaluation loop"),
]


@pytest.mark.parametrize("build, name, message", REFUSED,
                         ids=[f"{build.__name__[1:]}-{name}" for build, name, _ in REFUSED])
def test_an_argument_the_trainer_would_ignore_or_sets_itself_is_refused_naming_its_own(tmp_path, build, name,
                                                                                       message):
    """Each was ignored silently, or failed with "got multiple values for keyword argument"."""
    with pytest.raises(TypeError, match=message):
        build(tmp_path, **{name: object()})


def test_ltd_refuses_a_batch_size_it_would_not_read(tmp_path):
    with pytest.raises(ValueError, match=r"per_device_train_batch_size=64 would not be used.*Set minibatch_size"):
        LTDConfig(output_dir=str(tmp_path), report_to=[], per_device_train_batch_size=64)


# -- B9: a config that is not the trainer's ------------------------------------------------------------------------


@pytest.mark.parametrize("build, config", [
    (lambda args: Eagle3Trainer(model=None, args=args, target_model=None), "Eagle3Config"),
    (lambda args: PPOWTrainer(model=None, args=args, target_model=None), "PPOWConfig"),
    (lambda args: LTDTrainer(None, args, None), "LTDConfig"),
    (lambda args: RadarTrainer(None, args, None, None), "RadarConfig"),
    (lambda args: ReSpSTrainer(None, args, None), "ReSpSConfig"),
    (lambda args: DVITrainer(None, args, []), "DVIConfig"),
], ids=["eagle3", "ppow", "ltd", "radar", "resps", "dvi"])
@pytest.mark.parametrize("plain", [False, True], ids=["none", "training-arguments"])
def test_a_config_other_than_the_trainers_own_is_refused_naming_it(tmp_path, build, config, plain):
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[]) if plain else None
    with pytest.raises(TypeError, match=rf"needs args={config}\(\.\.\.\), got {type(args).__name__}"):
        build(args)


# -- A6: a half precision the trainer's own step would apply in part -----------------------------------------------


@pytest.mark.parametrize("config, step", [(LTDConfig, "LTDTrainer's training step replays"),
                                          (DVIConfig, "DVITrainer's training step generates")])
def test_bf16_is_refused_where_the_trainers_own_step_runs_outside_autocast(tmp_path, config, step):
    """Rollouts ran in float32, updates in bfloat16, while training_config.json said bf16."""
    with pytest.raises(ValueError, match=rf"bf16=True would apply only in part: {step}.*Leave bf16 and fp16 unset"):
        config(output_dir=str(tmp_path), report_to=[], bf16=True)


# -- B7: trainer.push_to_hub() called directly ---------------------------------------------------------------------


def test_a_direct_push_that_cannot_reach_the_hub_names_the_hub_and_the_saved_folder(tmp_path, monkeypatch):
    """It raised the HTTP client's bare ConnectError."""
    trainer = _radar_trainer(tmp_path)
    trainer.args.hub_model_id = "org/radar"
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # huggingface_hub retries an upload
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(HubUnreachableError, match=r"RadarTrainer.push_to_hub\(\) could not reach the Hub .* "
                                                  r"upload it once online \(`hf upload org/radar "):
        trainer.push_to_hub()


# -- B12: a checkpoint of another shape ------------------------------------------------------------------------------


@pytest.mark.parametrize("other", [
    dict(draft_to_target=torch.arange(0, 96, 3)),
    dict(num_hidden_layers=2),
], ids=["draft-vocabulary", "layers"])
def test_a_checkpoint_of_another_shape_is_refused_before_it_loads(tmp_path, other):
    """Another draft vocabulary failed in torch's load_state_dict (a bare size mismatch); one more layer loaded in
    part with a 'missing keys' warning, then failed in the optimizer ('parameter group doesn't match')."""
    target = tiny_model("llama")
    args = _eagle3_args(tmp_path, max_steps=2, save_strategy="steps", save_steps=2)
    Eagle3Trainer(model=Eagle3DraftModel.from_target(target), args=args, target_model=target,
                  train_dataset=CONVERSATIONS, data_collator=_collate).train()
    checkpoint = tmp_path / "eagle3" / "checkpoint-2"
    resumed = Eagle3Trainer(model=Eagle3DraftModel.from_target(target, **other),
                            args=_eagle3_args(tmp_path, max_steps=4), target_model=target,
                            train_dataset=CONVERSATIONS, data_collator=_collate)
    with pytest.raises(ValueError, match=r"holds weights of another shape than Eagle3Trainer's model .*build the "
                                         r"model as the run that saved it did"):
        resumed.train(resume_from_checkpoint=str(checkpoint))
    same = Eagle3Trainer(model=Eagle3DraftModel.from_target(target), args=_eagle3_args(tmp_path, max_steps=4),
                         target_model=target, train_dataset=CONVERSATIONS, data_collator=_collate)
    same.train(resume_from_checkpoint=str(checkpoint))
    assert same.state.global_step == 4


# -- B11: a training dataset that gives no batch ---------------------------------------------------------------------


def test_a_training_dataset_that_gives_no_batch_is_refused_by_name_when_training_starts(tmp_path):
    """An empty dataset failed in torch's sampler ('num_samples=0'); one smaller than a batch with
    dataloader_drop_last failed with transformers' 'dataloader does not have a length'. The check sits in Trainer's
    dataloader: a trainer built only to evaluate is not refused, nor one that batches its own rollouts (Re-SpS,
    whose per_device_train_batch_size counts decisions, overrides the dataloader)."""
    target = tiny_model("llama")
    empty = DVITrainer(target_model=target, args=DVIConfig(output_dir=str(tmp_path / "dvi"), max_steps=1, exit_layer=2,
                                                           report_to=[]), train_dataset=[])
    with pytest.raises(ValueError, match=r"train_dataset is empty: nothing to train"):
        empty.train()
    args = _eagle3_args(tmp_path, per_device_train_batch_size=8, dataloader_drop_last=True)
    small = Eagle3Trainer(model=Eagle3DraftModel.from_target(target), args=args, target_model=target,
                          train_dataset=CONVERSATIONS, data_collator=_collate)
    with pytest.raises(ValueError, match=r"train_dataset holds 4 rows, fewer than one batch of 8 .*drop_last"):
        small.train()


# -- B10: rows that are not conversations ----------------------------------------------------------------------------


@pytest.mark.parametrize("row, message", [
    ("a path", r"Conversation 0 of the training data is a str, not a mapping"),
    ({"loss_mask": [1] * 4}, r"Conversation 0 of the training data has no input_ids \(keys \['loss_mask'\]\)"),
    ({"input_ids": [1, 2, 3], "loss_mask": [0, 1]}, r"has 3 input_ids and a loss_mask of 2"),
    ({"input_ids": [1, 2, 500], "loss_mask": [0, 1, 1]}, r"token ids outside the target's vocabulary of 96 \(e.g. "
                                                         r"\[500\]\)"),
], ids=["string", "no-input-ids", "lengths", "outside-vocabulary"])
def test_a_training_row_that_is_no_conversation_is_refused_at_construction(tmp_path, row, message):
    """Each failed once training started: 'string indices must be integers', a KeyError, a size mismatch inside the
    loss, an IndexError in the embedding."""
    target = tiny_model("llama")
    with pytest.raises(ValueError, match=message):
        Eagle3Trainer(model=Eagle3DraftModel.from_target(target), args=_eagle3_args(tmp_path), target_model=target,
                      train_dataset=[row], data_collator=_collate)


def test_rows_of_tensors_count_their_answer_tokens():
    """A map-style torch Dataset or a with_format('torch') dataset gives tensor rows: their tokens, hashed by
    identity, were never found in the draft vocabulary, and the data was refused as holding no answer token."""
    from hf_adaptive_spec.training.eagle3.data import check_vocabulary_coverage

    draft = Eagle3DraftModel.from_target(tiny_model("llama"))
    rows = [{name: torch.tensor(values) for name, values in row.items()} for row in CONVERSATIONS]
    check_vocabulary_coverage(draft, rows, None)


def test_a_trainer_told_to_resume_before_any_checkpoint_exists_still_builds(tmp_path):
    """The coverage check reads which checkpoint args.resume_from_checkpoint resumes (to name a fix a resume takes):
    resume_from_checkpoint=True before a first checkpoint must not fail at construction (train names it)."""
    target = tiny_model("llama")
    trainer = Eagle3Trainer(model=Eagle3DraftModel.from_target(target),
                            args=_eagle3_args(tmp_path, resume_from_checkpoint="true"), target_model=target,
                            train_dataset=CONVERSATIONS, data_collator=_collate)
    assert trainer.args.resume_from_checkpoint == "true"
