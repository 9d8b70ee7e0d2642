"""Resuming a training run: the settings that define a run must stay as its checkpoint recorded them, and the script
arguments it was started with are written beside it to be compared."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from transformers import TrainingArguments
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import get_last_checkpoint

from ..core.settings import changed_settings
from ..hub.config import ARTIFACT_TYPE_KEY, CONFIG_NAME, read_json_object
from ..hub.registry import registered_class
from ..hub.weights import WEIGHTS_NAME, shape_differences
from .cli import TRAINERS

logger = logging.getLogger(__name__)

#: ``TrainingArguments`` that define what a run optimises, and the order it draws its data in; with a trainer's own
#: config fields, a resumed run must keep them (the schedule's length, logging, saving and evaluation may change). A new
#: learning rate would not even apply: the restored scheduler wins. Trainer resumes an epoch by skipping the batches the
#: checkpoint trained, counted in the order these settings give (the seeds, the sampler, the batch, dropping the last
#: one): another order skips other batches, retraining some samples and never training others.
_RUN_DEFINING = frozenset({
    "learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "weight_decay", "adam_beta1",
    "adam_beta2", "adam_epsilon", "max_grad_norm", "optim", "per_device_train_batch_size",
    "gradient_accumulation_steps", "seed", "data_seed", "train_sampling_strategy", "length_column_name",
    "dataloader_drop_last",
})
#: ``TrainingArguments`` that set the precision a run computes in: a resume may change them (a run moved to a machine
#: without bf16), with a warning, since the data and the schedule continue alike but the steps' numerics do not.
_PRECISION = frozenset({"bf16", "fp16"})


#: the file a checkpoint's training arguments are saved to (``SpecTrainer.save_training_config``)
TRAINING_CONFIG_NAME = "training_config.json"
#: the key of ``training_config.json`` naming the trainer that saved it
TRAINER_KEY = "hf_adaptive_spec_trainer"


def resolve_checkpoint(checkpoint: str | bool, output_dir: str) -> str:
    """The checkpoint folder ``resume_from_checkpoint`` names: ``True`` (or ``"true"`` from a command line or YAML,
    unless a folder has that name) is ``output_dir``'s last ``checkpoint-N``, as ``Trainer.train`` resolves it."""
    spelled_true = isinstance(checkpoint, str) and checkpoint.lower() == "true" and not os.path.isdir(checkpoint)
    if checkpoint is True or spelled_true:
        last = get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
        if last is None:
            raise ValueError(
                f"resume_from_checkpoint=True found no checkpoint-N folder in output_dir={output_dir!r}: pass the "
                "checkpoint's path, or the output_dir of the run to resume."
            )
        return last
    return str(checkpoint)


def resumed_checkpoint(args: TrainingArguments) -> str | None:
    """The checkpoint folder a run resumes (``resume_from_checkpoint``; ``true``: ``output_dir``'s last), or None
    when it resumes none or names no folder (the trainer's resume checks name what is wrong)."""
    if not args.resume_from_checkpoint:
        return None
    checkpoint = resolve_checkpoint(args.resume_from_checkpoint, args.output_dir)
    return checkpoint if Path(checkpoint, CONFIG_NAME).is_file() else None


def check_resume_settings(args: TrainingArguments, checkpoint: str | bool, trainer: str | None = None) -> None:
    """Refuse to resume ``checkpoint`` (``True``: the last one in ``args.output_dir``) with settings that define the
    run other than its ``training_config.json``'s, naming each as ``name: stored -> new`` (a config's
    ``resume_may_change`` fields aside), or saved by another kind of trainer than ``trainer``
    (:func:`check_trainer_kind`)."""
    checkpoint = resolve_checkpoint(checkpoint, args.output_dir)
    check_trainer_kind(checkpoint, trainer)
    path = os.path.join(checkpoint, TRAINING_CONFIG_NAME)
    if not os.path.isfile(path):
        return  # a checkpoint saved without it
    with open(path, encoding="utf-8") as handle:
        stored = json.load(handle)
    stored.pop(TRAINER_KEY, None)
    current = json.loads(args.to_json_string())
    own = {f.name for f in dataclasses.fields(args)} - {f.name for f in dataclasses.fields(TrainingArguments)}
    compared = ((own | _RUN_DEFINING) - getattr(args, "resume_may_change", frozenset())) & stored.keys()
    changed = changed_settings({k: stored[k] for k in compared}, {k: current.get(k) for k in compared})
    if changed:
        raise ValueError(
            f"resume_from_checkpoint={checkpoint} was trained with other settings ({'; '.join(changed)}): pass the "
            "checkpoint's values, or start a new run (init_from, where the trainer has it) instead of resuming."
        )
    kept = _PRECISION & stored.keys()
    precision = changed_settings({k: stored[k] for k in kept}, {k: current.get(k) for k in kept})
    if precision:
        logger.warning(
            "resume_from_checkpoint=%s was trained in another precision (%s): the resumed steps compute in this "
            "run's, the data and the schedule continue alike.", checkpoint, "; ".join(precision),
        )


def check_is_checkpoint(checkpoint: str) -> None:
    """Refuse to resume ``checkpoint`` when it is no folder, or a saved model rather than a checkpoint-N folder (its
    ``config.json``, weights or ``training_config.json`` without ``trainer_state.json``): a finished run's
    ``output_dir``, or its ``stable`` folder, holds the trained artifact alone, without the optimizer, schedule and
    step a resume continues (transformers failed on it with a bare FileNotFoundError, after the models loaded)."""
    if not os.path.isdir(checkpoint):
        raise ValueError(
            f"resume_from_checkpoint={checkpoint} is not a folder: pass a checkpoint-N folder a run saved, or true "
            "for output_dir's last one."
        )
    saved_model = any(os.path.isfile(os.path.join(checkpoint, name))
                      for name in (CONFIG_NAME, WEIGHTS_NAME, TRAINING_CONFIG_NAME))
    if saved_model and not os.path.isfile(os.path.join(checkpoint, TRAINER_STATE_NAME)):
        raise ValueError(
            f"resume_from_checkpoint={checkpoint} holds a saved model and no {TRAINER_STATE_NAME}: it is no "
            "checkpoint-N folder (a finished run's output_dir, or its stable folder, holds the model alone, without "
            "its optimizer and step). Resume one of the run's checkpoint-N folders, or start a new run from those "
            "weights (init_from, or the drafter's path, where the script takes one)."
        )


def check_trainer_kind(checkpoint: str, trainer: str | None, from_script: bool = False) -> None:
    """Refuse to resume ``checkpoint`` when its ``training_config.json`` names another kind of trainer than
    ``trainer`` (``SpecTrainer.kind()``), naming both: two trainers may save one kind of artifact (EAGLE-3 and PPOW
    train one drafter), and another trainer's weights, optimizer and schedule are not this run's. ``from_script``:
    the fix names the training scripts (another ``--output_dir``, or the script of the trainer that saved it).
    Checkpoints saved before the kind was kept are not compared."""
    path = os.path.join(checkpoint, TRAINING_CONFIG_NAME)
    if trainer is None or not os.path.isfile(path):
        return
    saved_by = read_json_object(path).get(TRAINER_KEY)
    if saved_by is None or saved_by == trainer:
        return
    if from_script:
        fix = (f"Give this '{trainer}' run another --output_dir (or a checkpoint a '{trainer}' run saved), or resume "
               f"that folder with {_script_of(saved_by)}")
    else:
        fix = f"Resume a checkpoint-N folder a '{trainer}' run saved"
    raise ValueError(
        f"resume_from_checkpoint={checkpoint} was saved by a '{saved_by}' trainer ({path}), and this run is a "
        f"'{trainer}' trainer's: another trainer's weights, optimizer and schedule are not this run's. {fix}; to "
        "start from those weights, start a new run from them (init_from, or the drafter's path, where the script "
        "takes one)."
    )


def _script_of(trainer: str) -> str:
    """How a message names the training script of the trainer kind ``trainer``."""
    if trainer in TRAINERS:
        return f"the '{trainer}' script (trainers/{trainer}.py, or `hf-adaptive-spec train {trainer}`)"
    return f"the script of the '{trainer}' trainer"


def check_checkpoint_kind(checkpoint: str, expected_type: str | None, trainer: str) -> None:
    """Refuse to resume ``checkpoint`` when its ``config.json`` declares another ``artifact_type`` than ``trainer``'s
    checkpoints do, ``expected_type`` (None: none, as an EAGLE-3 drafter in SpecForge's layout), naming both: another
    kind of trainer saved it, and its weights, optimizer and state are not this run's. A checkpoint without
    ``config.json`` is left to the trainer's own loading."""
    path = os.path.join(checkpoint, CONFIG_NAME)
    if not os.path.isfile(path):
        return
    found = read_json_object(path).get(ARTIFACT_TYPE_KEY)
    if found == expected_type:
        return
    holds = _artifact_kind(found, f"a {CONFIG_NAME} without {ARTIFACT_TYPE_KEY} (an EAGLE-3 drafter in SpecForge's "
                           "layout, or another library's model)")
    resumes = _artifact_kind(expected_type, f"an EAGLE-3 drafter in SpecForge's layout (no {ARTIFACT_TYPE_KEY})")
    raise ValueError(
        f"resume_from_checkpoint={checkpoint} holds {holds}, where {trainer} resumes {resumes}: another kind of "
        f"trainer saved it. Resume a checkpoint-N folder {trainer} saved, or drop resume_from_checkpoint to start a "
        "new run."
    )


def check_checkpoint_shapes(checkpoint: str, model: torch.nn.Module, trainer: str) -> None:
    """Refuse to resume ``checkpoint`` into ``model`` when its weights' names or shapes differ from the model's (another
    draft vocabulary, another number of layers): the weights failed to load with a bare size-mismatch error, or
    loaded in part with a warning before the optimizer's state failed ("parameter group doesn't match"). A checkpoint
    without ``model.safetensors`` is left to the trainer's own loading."""
    path = os.path.join(checkpoint, WEIGHTS_NAME)
    if not os.path.isfile(path):
        return
    with safe_open(path, "pt") as weights:
        saved = {name: tuple(weights.get_slice(name).get_shape()) for name in weights.keys()}  # noqa: SIM118
    held = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    trained = {name for name, parameter in model.named_parameters() if parameter.requires_grad}  # frozen: not saved
    missing, unexpected, misshaped = shape_differences(saved, held)
    differences = [f"{name}: {saved[name]} saved, {held[name]} here" for name in misshaped]
    differences += [f"{name}: saved, not in this model" for name in unexpected]
    differences += [f"{name}: trained in this model, not saved" for name in missing if name in trained]
    if differences:
        raise ValueError(
            f"resume_from_checkpoint={checkpoint} holds weights of another shape than {trainer}'s model "
            f"({len(differences)} differ, e.g. {'; '.join(differences[:3])}): build the model as the run that saved "
            f"it did (its {CONFIG_NAME}), or drop resume_from_checkpoint to start a new run."
        )


def _artifact_kind(artifact_type: str | None, unnamed: str) -> str:
    """How a checkpoint's ``artifact_type`` is named in a message (with the class registered for it, where one is;
    ``unnamed`` without one)."""
    if artifact_type is None:
        return unnamed
    holder = registered_class(artifact_type)
    return f"a '{artifact_type}' artifact" + (f" ({holder.__name__})" if holder else "")


#: the script arguments of a run, written to its ``output_dir`` (what a resumed run is compared with).
SCRIPT_ARGS_NAME = "script_args.json"
#: script arguments renamed so that every training script names the card's fields alike: old name -> new name
RENAMED_SCRIPT_ARGUMENTS = {"target_name": "base_model", "target_model_name": "base_model", "drafter": "drafter_name"}
#: script arguments a resumed run may change: names in the model card (their old names too, as a run started before
#: the renaming wrote them), threads, the time budget (the resumed run continues from the seconds its checkpoint spent,
#: at their share of the new budget: ``TimeBudgetCallback``) and what is only evaluated. The others (recordings,
#: profiles, datasets, shapes, ``init_from``, the lookup branch) define the run.
_MAY_CHANGE_ON_RESUME = frozenset({
    "base_model", "drafter_name", "dataset_name", "reproduce_command", *RENAMED_SCRIPT_ARGUMENTS,
    "num_threads", "max_train_minutes", "eval_recording_dir", "heldout_path", "heldout_conversations",
    "heldout_every_steps", "heldout_depth", "heldout_max_length", "profile_steps",
})


def check_resumed_script_args(script_args: Any, args: TrainingArguments, trainer: str | None = None) -> None:
    """Refuse to resume a run with script arguments that define it (its data, profile, shapes) other than the ones
    it was started with (``SCRIPT_ARGS_NAME`` kept in the checkpoint, else in its run folder), naming each as
    ``name: stored -> new``. A checkpoint another kind of trainer than ``trainer`` saved is refused as such first
    (:func:`check_trainer_kind`): its script's arguments differ too, and listing them hid the cause; then a folder that
    is no checkpoint (:func:`check_is_checkpoint`), before any model loads."""
    if not args.resume_from_checkpoint:
        return
    checkpoint = resolve_checkpoint(args.resume_from_checkpoint, args.output_dir)
    check_trainer_kind(checkpoint, trainer, from_script=True)
    check_is_checkpoint(checkpoint)
    path = _script_args_of(str(checkpoint), args.output_dir)
    if path is None:
        return  # a run started before its script arguments were written
    with open(path, encoding="utf-8") as handle:
        stored = {**_script_defaults(script_args), **json.load(handle)}  # an argument added since: its default then
    current = json.loads(json.dumps(dataclasses.asdict(script_args)))
    changed = changed_settings({k: v for k, v in stored.items() if k not in _MAY_CHANGE_ON_RESUME},
                               {k: v for k, v in current.items() if k not in _MAY_CHANGE_ON_RESUME})
    if changed:
        raise ValueError(
            f"resume_from_checkpoint={checkpoint} was trained with other script arguments ({'; '.join(changed)}, from "
            f"{path}): pass the run's values, or start a new run instead of resuming."
        )


def _script_defaults(script_args: Any) -> dict[str, Any]:
    """The defaults of ``script_args``' fields (what a run started before a field existed ran with)."""
    defaults = {}
    for f in dataclasses.fields(script_args):
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            defaults[f.name] = f.default_factory()
    return json.loads(json.dumps(defaults))


def _script_args_of(checkpoint: str, output_dir: str) -> str | None:
    """The script arguments that trained ``checkpoint``: the copy saved in it (:func:`keep_script_args`), else its
    run folder's (checkpoints saved before the copy; a later run into that folder, even one that failed at once,
    rewrote that file), else None."""
    is_folder = os.path.isdir(checkpoint)
    own = os.path.join(checkpoint, SCRIPT_ARGS_NAME)
    if is_folder and os.path.isfile(own):
        return own
    run_folder = os.path.dirname(os.path.normpath(checkpoint)) if is_folder else output_dir
    path = os.path.join(run_folder, SCRIPT_ARGS_NAME)
    return path if os.path.isfile(path) else None


def read_script_args(run_folder: str) -> str | None:
    """The text of the script arguments written to ``run_folder`` (None: none), read when a trainer is built: the
    arguments of the run that is starting, whatever another run writes to the folder later."""
    path = os.path.join(run_folder, SCRIPT_ARGS_NAME)
    return Path(path).read_text(encoding="utf-8") if os.path.isfile(path) else None


def keep_script_args(text: str | None, checkpoint: str, run_folder: str) -> None:
    """Save a run's script arguments (``text``, :func:`read_script_args`) in ``checkpoint``, a folder other than the
    run folder itself: a resume compares with those of the run that trained the checkpoint."""
    if text is not None and not (os.path.isdir(run_folder) and os.path.samefile(checkpoint, run_folder)):
        Path(checkpoint, SCRIPT_ARGS_NAME).write_text(text, encoding="utf-8")


def write_script_args(script_args: Any, output_dir: str) -> None:
    """Write the run's script arguments to ``output_dir`` (JSON), for a resumed run to be compared with."""
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, SCRIPT_ARGS_NAME), "w", encoding="utf-8") as handle:
        json.dump(dataclasses.asdict(script_args), handle, indent=2)
