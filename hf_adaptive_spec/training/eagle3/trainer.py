"""``Eagle3Trainer``: trains an EAGLE-3 drafter against a frozen target (TRL conventions)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sized
from typing import ClassVar

import torch
from huggingface_hub import ModelCard
from torch.profiler import record_function
from transformers import PreTrainedModel

from ...drafters.eagle3.modeling import Eagle3DraftModel
from ...generation.prompt_lookup import lookup_hits
from ...hub.cards import CardResult, check_base_model, render_card
from ..base import CardNames, SamplesDrawn, SpecTrainer
from ..resume import resumed_checkpoint
from .config import Eagle3Config
from .curve import CURVE_FILE, HeldOutCurveCallback, write_curve
from .data import check_vocabulary_coverage, dataset_rows
from .feature_cache import FeatureCache, target_signature
from .features import TargetFeatures
from .lineage import Lineage, write_lineage
from .ttt import TTTBatch, step_loss_weight_totals, ttt_loss


def _resumed_by_args(args: Eagle3Config) -> str | None:
    """The checkpoint ``args.resume_from_checkpoint`` resumes, for the coverage warning's fix; None where it names
    none yet (``True`` before a first checkpoint: ``train`` names what is wrong, as it did before this was read)."""
    try:
        return resumed_checkpoint(args)
    except ValueError:
        return None


class Eagle3Trainer(SpecTrainer):
    """Trains :class:`Eagle3DraftModel` with EAGLE-3's training-time test.

    Target features are computed on the fly by the frozen ``target_model`` (it never trains), or read from
    ``args.feature_cache_dir`` for the conversations an earlier pass computed them for.
    Saves write the SpecForge checkpoint layout (safetensors) plus ``training_config.json``; no
    pickled training arguments. With a :class:`HeldOutCurveCallback`, every saved folder also holds
    the held-out learning curve so far (``heldout_curve.jsonl``), and with ``lineage`` (a callable giving the prompt
    digests this drafter has trained on so far, its stages before included: a :class:`~.lineage.Lineage`)
    ``trained_prompts.json``, which a later stage's held-out curve reads. ``init_from``: the drafter folder the model
    was started from (an earlier stage), named in the card.

    A resumed checkpoint must hold the draft vocabulary of ``model`` (build the model from the checkpoint, as the
    script does): the target's logits are read over ``model``'s vocabulary from the start.

    With gradient accumulation (and several processes) the update is the one of a single batch holding all the
    accumulated micro-batches: each training-time-test step's loss is divided by that step's loss weight summed over
    them (:meth:`get_batch_samples`), not by the micro-batch's own.
    """

    trainer_kind: ClassVar[str] = "eagle3"
    config_class = Eagle3Config

    _tag_names: ClassVar[list[str]] = ["hf-adaptive-spec", "eagle3", "speculative-decoding"]
    _target_features_class = TargetFeatures
    #: whether :meth:`compute_loss` is the training-time-test loss, normalised over the accumulated micro-batches by
    #: the totals :meth:`get_batch_samples` counts; a subclass that computes another loss sets it False, and then
    #: ``Trainer`` divides its loss by the accumulation steps
    normalises_over_accumulation: ClassVar[bool] = True
    _name = "EAGLE-3"
    _paper: ClassVar[dict[str, str]] = {
        "title": "EAGLE-3: Scaling up Inference Acceleration of Large Language Models via Training-Time Test",
        "id": "2503.01840",
    }

    def __init__(
        self,
        model: Eagle3DraftModel,
        args: Eagle3Config,
        target_model: PreTrainedModel,
        dataset_name: str | None = None,
        reproduce_command: str | None = None,
        base_model: str | None = None,
        lineage: Callable[[], Lineage] | None = None,
        init_from: str | None = None,
        **kwargs,
    ):
        check_base_model(base_model)
        self.check_args(args)
        self._check_target(model, target_model)
        train_dataset = kwargs.get("train_dataset")
        if isinstance(train_dataset, Sized):  # a stream is not read ahead (the script checks what it loaded)
            check_vocabulary_coverage(model, dataset_rows(train_dataset), model.config.name_or_path or None,
                                      resumed=_resumed_by_args(args))
        self.lineage, self.init_from = lineage, init_from
        super().__init__(model=model, args=args, **kwargs)
        # the card's names; the target defaults to the loaded one's name (a drafter's card names no drafter)
        self.card_names = CardNames(base_model or target_model.config.name_or_path or None, None, dataset_name,
                                    reproduce_command)
        self.can_return_loss = True
        # Trainer's switch for a loss normalised by num_items_in_batch: given the totals, training_step does not
        # divide the loss by the accumulation steps; without them (no count) it does
        self.model_accepts_loss_kwargs = self.normalises_over_accumulation
        self.add_callback(SamplesDrawn())  # the conversations the card says it trained on
        self.target_features = self._target_features_class(
            target_model.to(self.args.device), model.config.aux_hidden_state_layer_ids, model.draft_to_target()
        )
        self.target_features.cache = self._feature_cache(target_model, model.config.aux_hidden_state_layer_ids)
        self._cache_counted = (0, 0)
        self._saving_stable_point = False

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        """Resume the weights; refuse a checkpoint of another draft vocabulary than the one the target's logits are
        read over (loading replaces the drafter's, so the loss would pair the drafter's tokens with other ones)."""
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        loaded = self.accelerator.unwrap_model(self.model if model is None else model).draft_to_target()
        built = self.target_features.draft_to_target.to(loaded.device)
        if not torch.equal(loaded, built):
            raise ValueError(
                f"The checkpoint {resume_from_checkpoint} holds another draft vocabulary than the drafter this "
                f"trainer was built with ({int((~torch.isin(loaded, built)).sum())} of its {loaded.numel()} tokens "
                "differ, or their order): the loss would read the target's logits over the other one. Build the "
                "drafter from the checkpoint (Eagle3DraftModel.from_pretrained(checkpoint, target=...)) to resume it."
            )

    def _check_target(self, model: Eagle3DraftModel, target_model: PreTrainedModel) -> None:
        """Refuse a drafter built for another target (its depth, width, vocabulary or feature layers), as loading it
        on ``target_model`` would: the drafter saved would not load on it. One loaded with
        ``ignore_target_mismatch=True`` already follows ``target_model``'s depth."""
        try:
            model.config.check_target(target_model.config)
        except ValueError as error:
            raise ValueError(f"{type(self).__name__}: the drafter does not fit target_model. {error}") from error

    def _feature_cache(self, target_model: PreTrainedModel, layer_ids: list[int]) -> FeatureCache | None:
        """``args.feature_cache_dir``'s cache, or None; refused with more than one process."""
        if not self.args.feature_cache_dir:
            return None
        if self.args.world_size > 1:
            raise ValueError(
                f"feature_cache_dir works in one process, and this run has {self.args.world_size}: every pass deals "
                "the conversations to the processes anew, so each would meet its own cached ones a fraction of the "
                "time while storing up to feature_cache_max_gb of its own. Train in one process, or leave "
                "feature_cache_dir unset."
            )
        return FeatureCache(self.args.feature_cache_dir, self.args.feature_cache_max_gb,
                            target_signature(target_model, layer_ids))

    def get_batch_samples(self, epoch_iterator, num_batches: int, device: torch.device):
        """``Trainer``'s micro-batches of one optimizer step, with as ``num_items_in_batch`` each training-time-test
        step's loss weight summed over them (``[ttt_steps]``, :func:`~.ttt.step_loss_weight_totals`), and over the
        processes with ``average_tokens_across_devices`` (transformers' default): :meth:`compute_loss` divides each
        step's summed loss by it, so the accumulated gradient is the one of a single batch holding them all, as
        transformers' token-counted losses make it."""
        batch_samples, counted = super().get_batch_samples(epoch_iterator, num_batches, device)
        if not self.normalises_over_accumulation or not batch_samples:
            return batch_samples, counted
        totals = sum(self._step_loss_weight_totals(batch, device) for batch in batch_samples)
        if self.args.average_tokens_across_devices and self.args.world_size > 1:
            totals = self.accelerator.gather(totals).view(-1, totals.numel()).sum(0)
        return batch_samples, totals

    def _step_loss_weight_totals(self, inputs: dict[str, torch.Tensor], device: torch.device) -> torch.Tensor:
        """``[ttt_steps]`` each step's loss weight summed over the batch ``inputs``, before any forward pass."""
        ids = inputs["input_ids"].to(device)
        t2d = self.accelerator.unwrap_model(self.model).t2d.to(device)
        return step_loss_weight_totals(ids, self._answer_mask(inputs).to(device), t2d, self.args.ttt_steps,
                                       self._loss_weight(ids))

    @staticmethod
    def _answer_mask(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The batch's answer tokens (its ``loss_mask``), padding left out."""
        return inputs["loss_mask"] * inputs["attention_mask"]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """:func:`~.ttt.ttt_loss` of the batch. In training, given ``num_items_in_batch`` (:meth:`get_batch_samples`'s
        per-step totals), each step's summed loss is divided by its total, and multiplied by the number of processes
        when the totals were summed over them (DDP averages the processes' gradients); otherwise (and in evaluation)
        by the batch's own, the batch's mean."""
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        with record_function("train.target_features"):  # named for StepProfileCallback's phase summary
            features, target_logits = self.target_features(ids, mask, cached=model.training)
        if model.training:  # evaluation batches run the target: the cache holds the training conversations only
            self._log_feature_cache()
            self.count_samples(len(ids))
        # a bfloat16 target's features
        features = features.to(self.accelerator.unwrap_model(model).lm_head.weight.dtype)
        batch = TTTBatch(ids, features, target_logits, self._answer_mask(inputs), self._loss_weight(ids))
        t2d = self.accelerator.unwrap_model(model).t2d
        totals = num_items_in_batch.to(features.device) if model.training and num_items_in_batch is not None else None
        with record_function("train.draft_and_loss"):
            loss, step_losses, step_accuracy = ttt_loss(
                model, batch, self.args.ttt_steps, self.args.ploss_decay, t2d, self.args.recompute_loss_softmax,
                self.args.compile_loss, self.args.target_temperature, step_normalisers=totals,
            )
        if totals is not None and self.args.average_tokens_across_devices:
            loss = loss * self.accelerator.num_processes
        for step, (step_loss, accuracy) in enumerate(zip(step_losses, step_accuracy)):
            self.step_metrics[f"loss_step{step}"].append(step_loss)
            self.step_metrics[f"acc_step{step}"].append(accuracy)
        return (loss, {"loss": loss}) if return_outputs else loss

    def _log_feature_cache(self) -> None:
        """Log the share of this batch's conversations read from the feature cache, and how many rows it has had no
        room for so far (those run the target every pass: raise feature_cache_max_gb if the disk allows)."""
        cache = self.target_features.cache
        if cache is None:
            return
        hits, misses = cache.hits - self._cache_counted[0], cache.misses - self._cache_counted[1]
        self._cache_counted = (cache.hits, cache.misses)
        self.step_metrics["feature_cache_hit_rate"].append(hits / max(1, hits + misses))
        self.step_metrics["feature_cache_refused"].append(float(cache.refused))

    def _loss_weight(self, input_ids: torch.LongTensor) -> torch.Tensor | None:
        """``1 + copy_loss_weight`` on the tokens a prompt lookup would have proposed, 1 elsewhere (None: no
        weighting)."""
        if not self.args.copy_loss_weight:
            return None
        copied = lookup_hits(input_ids, self.args.copy_ngram_size)
        return 1.0 + self.args.copy_loss_weight * copied.float()

    def save_artifact(self, output_dir: str) -> None:
        self.accelerator.unwrap_model(self.model).save_pretrained(output_dir)
        self.model_card().save(os.path.join(output_dir, "README.md"))
        for callback in self._held_out_callbacks():
            write_curve(output_dir, callback.points)
        if self.lineage is not None:
            write_lineage(output_dir, self.lineage())

    def _held_out_callbacks(self) -> list[HeldOutCurveCallback]:
        """The run's held-out curve callbacks (none without ``heldout_path``)."""
        return [c for c in self.callback_handler.callbacks if isinstance(c, HeldOutCurveCallback)]

    def save_stable_point(self, output_dir: str) -> None:
        """Save the drafter as the learning rate starts to decay (a ``warmup_stable_decay`` run), its held-out curve
        ending with a point at this step: the folder a next stage's ``init_from`` resumes from, so that the stage
        does not restart from annealed weights."""
        for callback in self._held_out_callbacks():
            callback.measure(self.args, self.state, self.model)
        self._saving_stable_point = True
        try:
            self.save_model(output_dir, _internal_call=True)  # not pushed mid-run; the final push uploads it
        finally:
            self._saving_stable_point = False

    def _training_description(self) -> str:
        start = (f", starting from the drafter `{self.init_from}` (these counts are this stage's alone)."
                 if self.init_from else ".")
        description = (
            f"Trained with the training-time test ({self.args.ttt_steps} steps) for {self.state.global_step} "
            f"optimizer steps {self.samples_drawn().phrase('conversations')}{start}"
        )
        if self.args.target_temperature != 1.0:
            description += (
                f" The loss read the target's distribution at temperature {self.args.target_temperature:g} ("
                + ("sharpened toward its top token)." if self.args.target_temperature < 1 else "flattened).")
            )
        if self._saving_stable_point:
            description += (
                " This is the run's stable point, saved as its learning rate began to decay: a next stage resumes "
                "from it (init_from); the drafter to ship is the decayed one the run ended with."
            )
        return description

    def _held_out_description(self) -> str:
        """The card's sentence on the held-out curve's last point ("" without a curve)."""
        points = [c.points for c in self._held_out_callbacks() if c.points]
        if not points:
            return ""
        last = points[0][-1]
        # an earlier stage's point, measured before both were
        if last.first_draft_acceptance is None or last.decoding_tau is None:
            return ""
        trained = (f" {last.heldout_trained} of its conversations open with a prompt this run trained on (records the "
                   "stream read after the held-out set was built), so this point measures them too."
                   if last.heldout_trained else "")
        return (
            f" Held out ({last.positions:,} answer positions, target in {last.measured_in}, after {last.step} steps): "
            f"greedy first-draft acceptance {last.first_draft_acceptance:.4f}, chain τ({len(last.step_accuracy)}) "
            f"{last.chain_tau:.3f}, decoding τ {last.decoding_tau:.3f}; the curve is `{CURVE_FILE}`.{trained}"
        )

    def model_card(self, results: tuple[CardResult, ...] = ()) -> ModelCard:
        """The drafter's card (``model_cards/eagle3_drafter.md``): target, data, steps, held-out point, command,
        results."""
        return render_card(
            "eagle3_drafter",
            method="eagle3",
            **self.card_names.card_fields(),
            results=results,
            description=self._training_description() + self._held_out_description(),
            paper_url="https://arxiv.org/abs/2503.01840",
        )
