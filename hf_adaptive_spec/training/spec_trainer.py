"""``SpecTrainer``, the ``Trainer`` every trainer of this project derives from (TRL conventions, without TRL's LM-only
base), and ``SamplesDrawn``, the count its cards state. What the training scripts share is in ``base.py``."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import Any, ClassVar

import torch
from huggingface_hub import ModelCard
from transformers import PreTrainedModel, Trainer, TrainerCallback
from transformers.trainer_callback import ExportableState

from ..hub import ArtifactLocation, load_weights
from ..hub.network import reaching_the_hub
from .resume import (
    TRAINER_KEY,
    TRAINING_CONFIG_NAME,
    check_checkpoint_kind,
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


class SpecTrainer(Trainer):
    """A ``Trainer`` that averages per-step metrics into each log line (TRL's ``_metrics``
    pattern) and saves its arguments as ``training_config.json`` (never a pickle)."""

    _tag_names: ClassVar[list[str]] = ["hf-adaptive-spec", "speculative-decoding"]
    #: what this trainer's checkpoints are, as ``training_config.json`` records it (a resume by a trainer of another
    #: kind is refused); a subclass of a shipped trainer inherits its kind, and one with none is named by its class
    trainer_kind: ClassVar[str | None] = None

    def __init__(self, *args, **kwargs):
        self._metrics: dict[str, list[float]] = defaultdict(list)
        kept = "Nothing was trained yet: train without push_to_hub, then upload output_dir once online (`hf upload`)."
        with reaching_the_hub(f"{type(self).__name__} (push_to_hub=True creates the Hub repo first)", kept):
            super().__init__(*args, **kwargs)
        self._script_args = read_script_args(self.args.output_dir)  # this run's, kept in each checkpoint

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        prefix = "eval_" if any(key.startswith("eval_") for key in logs) else ""
        logs.update({prefix + key: sum(values) / len(values) for key, values in self._metrics.items() if values})
        self._metrics.clear()
        super().log(logs, start_time)

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
        """``Trainer.train``; a resumed run must keep the settings that define it (:func:`check_resume_settings`).
        ``resume_from_checkpoint=True`` is resolved to ``output_dir``'s last checkpoint first, so that it is checked
        too (``Trainer`` would resolve it only after)."""
        if resume_from_checkpoint:
            resume_from_checkpoint = resolve_checkpoint(resume_from_checkpoint, self.args.output_dir)
            check_checkpoint_kind(resume_from_checkpoint, self.checkpoint_artifact_type(), type(self).__name__)
            check_resume_settings(self.args, resume_from_checkpoint, self.kind())
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

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
            kept = (f"The trained artifact is saved in {self.args.output_dir}: upload it once online (`hf upload "
                    f"{self.hub_model_id or 'REPO'} {self.args.output_dir}`).")
            with reaching_the_hub(f"{type(self).__name__}.push_to_hub()", kept):
                self.push_to_hub()

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
