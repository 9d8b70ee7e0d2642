"""``SpecTrainer``, the ``Trainer`` every trainer of this project derives from (TRL conventions, without TRL's LM-only
base), and ``SamplesDrawn``, the count its cards state. What the training scripts share is in ``base.py``."""

from __future__ import annotations

import contextlib
import json
import os
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sized
from typing import Any, ClassVar

import torch
from huggingface_hub import ModelCard
from transformers import PreTrainedModel, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_callback import ExportableState

from ..hub import ArtifactLocation, load_weights
from ..hub.network import reaching_the_hub
from .resume import (
    TRAINER_KEY,
    TRAINING_CONFIG_NAME,
    check_checkpoint_kind,
    check_checkpoint_shapes,
    check_is_checkpoint,
    check_resume_settings,
    keep_script_args,
    read_script_args,
    resolve_checkpoint,
)


class SamplesDrawn(TrainerCallback, ExportableState):
    """The training samples (conversations, prompts) a run has drawn, every process's and, resumed, its checkpoint's:
    what a model card says it trained on. A trainer that counts adds it and calls :meth:`SpecTrainer.count_samples`.
    The count is kept in a checkpoint's ``trainer_state.json`` and read back when a run resumes it, whatever
    ``restore_callback_states_from_checkpoint`` says; ``complete`` is False after resuming a checkpoint saved before
    samples were counted (the count then holds only the samples drawn since)."""

    def __init__(self, samples: int = 0, complete: bool = True):
        self.samples, self.complete = samples, complete

    def state(self) -> dict[str, Any]:
        return {"args": {"samples": self.samples, "complete": self.complete}, "attributes": {}}

    def on_train_begin(self, args, state, control, **kwargs):
        stored = state.stateful_callbacks.get(type(self).__name__)
        if stored:  # a new run's state holds this callback's own count, a resumed one its checkpoint's
            self.samples, self.complete = stored["args"]["samples"], stored["args"]["complete"]
            return
        self.samples, self.complete = 0, not state.global_step
        state.stateful_callbacks[type(self).__name__] = self.state()  # where Trainer updates it at each save

    def phrase(self, noun: str) -> str:
        """How a card states the count: ``over N <noun> drawn`` (``over at least N`` when it is not complete)."""
        return f"over {'' if self.complete else 'at least '}{self.samples} {noun} drawn"


def refuse_unread_arguments(trainer: str, kwargs: Mapping[str, Any], instead: Mapping[str, str]) -> None:
    """Refuse each keyword of ``kwargs`` that ``trainer`` does not read, or sets itself (``Trainer`` would ignore it, or
    fail with "got multiple values"), naming in ``instead[name]`` what the trainer reads in its place."""
    given = [name for name in instead if name in kwargs]
    if given:
        raise TypeError(f"{trainer} does not take " + "; ".join(f"{name}= ({instead[name]})" for name in given) + ".")


def check_train_dataset_size(dataset: Any, args: TrainingArguments) -> None:
    """Refuse a training dataset with a length that gives ``Trainer``'s dataloader no batch: an empty one (torch's
    sampler failed with 'num_samples=0'), or one smaller than a batch with ``dataloader_drop_last`` (transformers'
    'dataloader does not have a length')."""
    if not isinstance(dataset, Sized):
        return
    if not len(dataset):
        raise ValueError("train_dataset is empty: nothing to train. Pass the data to train on.")
    batch = args.per_device_train_batch_size * max(1, args.world_size)
    if args.dataloader_drop_last and len(dataset) < batch:
        raise ValueError(
            f"train_dataset holds {len(dataset)} rows, fewer than one batch of {batch} (per_device_train_batch_size "
            f"{args.per_device_train_batch_size} on {max(1, args.world_size)} processes), and dataloader_drop_last "
            "drops it: lower per_device_train_batch_size, or leave dataloader_drop_last off."
        )


class SpecTrainer(Trainer):
    """A ``Trainer`` that averages per-step metrics into each log line (TRL's ``_metrics``
    pattern: training's and an evaluation's kept apart) and saves its arguments as ``training_config.json`` (never a
    pickle)."""

    _tag_names: ClassVar[list[str]] = ["hf-adaptive-spec", "speculative-decoding"]
    #: what this trainer's checkpoints are, as ``training_config.json`` records it (a resume by a trainer of another
    #: kind is refused); a subclass of a shipped trainer inherits its kind, and one with none is named by its class
    trainer_kind: ClassVar[str | None] = None
    #: the config this trainer reads (``args``): its own fields drive training
    config_class: ClassVar[type[TrainingArguments]] = TrainingArguments

    def __init__(self, *args, **kwargs):
        self._metrics: dict[str, dict[str, list[float]]] = {"train": defaultdict(list), "eval": defaultdict(list)}
        self._evaluation_prefix: str | None = None  # the metric_key_prefix while an evaluation runs
        kept = "Nothing was trained yet: train without push_to_hub, then upload output_dir once online (`hf upload`)."
        with reaching_the_hub(f"{type(self).__name__} (push_to_hub=True creates the Hub repo first)", kept):
            super().__init__(*args, **kwargs)
        self._script_args = read_script_args(self.args.output_dir)  # this run's, kept in each checkpoint

    @classmethod
    def check_args(cls, args: Any) -> None:
        """Refuse ``args`` that is not a :attr:`config_class` (None, a plain ``TrainingArguments``): a trainer calls it
        before it reads ``args``."""
        if not isinstance(args, cls.config_class):
            name = cls.config_class.__name__
            raise TypeError(
                f"{cls.__name__} needs args={name}(...), got {type(args).__name__}: it reads that config's own "
                f"fields. Build a {name} with output_dir and the settings you need."
            )

    @property
    def step_metrics(self) -> dict[str, list[float]]:
        """Where a step appends its metrics: the evaluation's store while an evaluation runs, else training's."""
        return self._metrics["train" if self._evaluation_prefix is None else "eval"]

    @contextlib.contextmanager
    def evaluating(self, metric_key_prefix: str = "eval") -> Iterator[None]:
        """Within: an evaluation runs, its steps' metrics kept apart from training's and logged with its prefix;
        what it leaves unlogged is dropped at the end."""
        outer, self._evaluation_prefix = self._evaluation_prefix, metric_key_prefix
        try:
            yield
        finally:
            self._evaluation_prefix = outer  # Trainer.evaluate nests one evaluation per dataset of a dict
            if outer is None:
                self._metrics["eval"].clear()

    def get_train_dataloader(self):
        """``Trainer``'s dataloader, refused by name when it would hold no batch (:func:`check_train_dataset_size`; a
        trainer that batches its own rollouts overrides this)."""
        check_train_dataset_size(self.train_dataset, self.args)
        return super().get_train_dataloader()

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """``Trainer.log`` with the mean of each metric the steps appended since the last log of the same kind
        (training's into a training log, an evaluation's, prefixed, into its log)."""
        prefix = "" if self._evaluation_prefix is None else f"{self._evaluation_prefix}_"
        metrics = self.step_metrics
        logs.update({prefix + key: sum(values) / len(values) for key, values in metrics.items() if values})
        metrics.clear()
        super().log(logs, start_time)

    def evaluate(self, eval_dataset=None, ignore_keys: list[str] | None = None, metric_key_prefix: str = "eval"):
        """``Trainer.evaluate``, its batches' metrics logged apart from training's (:meth:`evaluating`)."""
        with self.evaluating(metric_key_prefix):
            return super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)

    def log_evaluation(self, metrics: dict[str, float], metric_key_prefix: str = "eval") -> None:
        """Log an evaluation's ``metrics`` (already prefixed) and tell the callbacks, as ``Trainer.evaluate`` does: for
        a trainer whose ``evaluate`` replays rather than runs ``Trainer``'s evaluation loop."""
        with self.evaluating(metric_key_prefix):
            self.log(dict(metrics))
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """The artifact (:meth:`save_artifact`) and ``training_config.json``, written by the writer process alone, as
        ``Trainer._save`` does: under torchrun every rank reaches here, and a second rank writing the same files raced
        the writer (its policy's ``save_pretrained`` replaced the card the writer had just rendered)."""
        if not self.args.should_save:
            return
        output_dir = output_dir or self.args.output_dir
        os.makedirs(output_dir, exist_ok=True)
        self.save_artifact(output_dir)
        self.save_training_config(output_dir)
        keep_script_args(self._script_args, output_dir, self.args.output_dir)  # the arguments that trained it

    def count_samples(self, count: int) -> None:
        """Add the ``count`` training samples this process drew to the run's :class:`SamplesDrawn` (the trainer must
        have added one), summed over the processes; every process calls it at the same step."""
        drawn = self.accelerator.gather(torch.tensor(count, device=self.args.device)).sum().item()
        self.samples_drawn().samples += int(drawn)

    def samples_drawn(self) -> SamplesDrawn:
        """The run's :class:`SamplesDrawn` (looked up: restoring callback states from a checkpoint replaces it)."""
        return next(c for c in self.callback_handler.callbacks if isinstance(c, SamplesDrawn))

    def save_artifact(self, output_dir: str) -> None:
        """Write what this trainer trains, with its card, to ``output_dir`` (the writer process only)."""
        raise NotImplementedError

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        """``Trainer.train``; a resumed run must keep the settings that define it (:func:`check_resume_settings`), and
        resume a checkpoint-N folder (:func:`check_is_checkpoint`). ``resume_from_checkpoint=True`` is resolved to
        ``output_dir``'s last checkpoint first, so that it is checked too (``Trainer`` would resolve it only after).
        While it trains, ``args.resume_from_checkpoint`` names the checkpoint resumed, for the callbacks that read it
        (the held-out curve continues its points), as it does when a script resumes: given to ``train`` alone, the
        callbacks looked for it in ``output_dir``."""
        if not resume_from_checkpoint:
            return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        checkpoint = resolve_checkpoint(resume_from_checkpoint, self.args.output_dir)
        check_checkpoint_kind(checkpoint, self.checkpoint_artifact_type(), type(self).__name__)
        check_resume_settings(self.args, checkpoint, self.kind())
        check_is_checkpoint(checkpoint)
        given, self.args.resume_from_checkpoint = self.args.resume_from_checkpoint, checkpoint
        try:
            return super().train(resume_from_checkpoint=checkpoint, **kwargs)
        finally:
            self.args.resume_from_checkpoint = given

    def checkpoint_artifact_type(self) -> str | None:
        """The ``artifact_type`` this trainer's checkpoints declare in ``config.json``: its model's (None where the
        model declares none, as an EAGLE-3 drafter in SpecForge's layout)."""
        return getattr(self.accelerator.unwrap_model(self.model), "artifact_type", None)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: torch.nn.Module | None = None) -> None:
        """Resume the weights: a transformers model's as ``Trainer`` does, any other's (a policy) strictly from the
        checkpoint's safetensors (``Trainer``'s loader reads a file that does not fit in part, and reports it with a
        bare AttributeError on a module that is no transformers model)."""
        model = self.accelerator.unwrap_model(self.model if model is None else model)
        if isinstance(model, PreTrainedModel):
            check_checkpoint_shapes(resume_from_checkpoint, model, type(self).__name__)  # Trainer's loads in part
            super()._load_from_checkpoint(resume_from_checkpoint, model)
            return
        load_weights(model, ArtifactLocation(resume_from_checkpoint))

    def train_save_and_push(self) -> None:
        """What every training script ends with: train (resuming if asked), save, push if asked."""
        self.train(resume_from_checkpoint=self.args.resume_from_checkpoint)
        self.save_and_push()

    def save_and_push(self) -> None:
        """Save to ``output_dir``, then push it if asked, in one commit (``Trainer.save_model`` called from outside
        pushes too, so the push of the end of training made a second commit); a Hub out of reach is named, with the
        folder kept."""
        self.save_model(self.args.output_dir, _internal_call=True)
        if self.args.push_to_hub:
            self.push_to_hub()

    def push_to_hub(self, *args, **kwargs):
        """``Trainer.push_to_hub`` (it saves to ``output_dir``, then uploads it); a Hub out of reach is named, with the
        folder kept."""
        kept = (f"The trained artifact is saved in {self.args.output_dir}: upload it once online (`hf upload "
                f"{self.hub_model_id or self.args.hub_model_id or 'REPO'} {self.args.output_dir}`).")
        with reaching_the_hub(f"{type(self).__name__}.push_to_hub()", kept):
            return super().push_to_hub(*args, **kwargs)

    def model_card(self) -> ModelCard:
        """The card of what this trainer trains (each trainer renders its own template)."""
        raise NotImplementedError

    def create_model_card(self, output_dir: str | None = None, **_: Any) -> None:
        """Write :meth:`model_card` to ``output_dir`` (default ``args.output_dir``) as ``README.md``.
        ``Trainer.push_to_hub`` calls this before it uploads the folder, with card fields of its own (``model_name``,
        ``tags``) that do not apply to these artifacts."""
        if self.is_world_process_zero():
            self.model_card().save(os.path.join(output_dir or self.args.output_dir, "README.md"))

    @classmethod
    def kind(cls) -> str:
        """:attr:`trainer_kind`, else the class's name (a script checks it before building its trainer)."""
        return cls.trainer_kind or cls.__name__

    def save_training_config(self, output_dir: str) -> None:
        """Write the training arguments as JSON (``Trainer`` would pickle ``training_args.bin``), with the trainer's
        :meth:`kind` under ``TRAINER_KEY``: a resume checks it (:func:`~.resume.check_resume_settings`), since two
        trainers may save the same kind of artifact (EAGLE-3 and PPOW train one drafter)."""
        stored = {TRAINER_KEY: self.kind(), **json.loads(self.args.to_json_string())}
        with open(os.path.join(output_dir, TRAINING_CONFIG_NAME), "w", encoding="utf-8") as handle:
            handle.write(json.dumps(stored, indent=2))
