"""``DVITrainer``: one offline pass of DVI's online loop over a prompt stream (TRL conventions)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from huggingface_hub import ModelCard
from torch import nn
from transformers import PreTrainedModel, set_seed
from transformers.utils import logging

from ...core.sequences import end_of_sequence_ids
from ...drafters.dvi.drafter import DVIDrafter
from ...drafters.dvi.learner_state import ROLLOUT_STATE_NAME, warn_schedule_restarts
from ...generation.enable import enable
from ...hub.cards import CardResult, check_base_model
from ...policies.base import DraftPolicy
from ...policies.static import StaticTreePolicy
from ..base import CardNames, SamplesDrawn, SpecTrainer
from ..spec_trainer import refuse_unread_arguments
from .config import DVIConfig
from .replay import GreedyChainReplay

logger = logging.get_logger(__name__)

#: the updates' metrics logged (their means over the logging window); ``grad_norm`` is the updater's, in place of
#: the Trainer's, which measured the head after the updater had stepped and cleared its gradients (always 0)
_LOGGED_UPDATE_FIELDS = (
    "kl", "ce", "pg", "entropy", "kl_weight", "ce_weight", "pg_weight", "baseline", "fresh_reward", "grad_norm"
)
#: replayed answers whose mean completion_greedy_agreement is checked once, and the mean below which a warning says so
AGREEMENT_CHECK_ANSWERS = 20
LOW_GREEDY_AGREEMENT = 0.8


def collate_prompts(features: list[dict[str, Any]]) -> dict[str, list[list[int]]]:
    """Batch of ``{"input_ids": [...]}`` prompts (and ``completion_ids`` when given), kept as lists."""
    batch = {"input_ids": [list(feature["input_ids"]) for feature in features]}
    if all("completion_ids" in feature for feature in features):
        batch["completion_ids"] = [list(feature["completion_ids"]) for feature in features]
    return batch


def adopt_adapter_settings(training_args: DVIConfig, drafter: DVIDrafter) -> None:
    """A given drafter (the adapter ``init_from`` names) sets the exit layer and the LoRA shape; the config takes its
    values (so that ``training_config.json`` records what trained) and a warning names each value asked for and not
    used."""
    adapter = {"exit_layer": drafter.exit_layer, "lora_r": drafter.lora_config.r,
               "lora_alpha": drafter.lora_config.lora_alpha, "lora_dropout": drafter.lora_config.lora_dropout}
    replaced = {
        name: getattr(training_args, name) for name, value in adapter.items() if getattr(training_args, name) != value
    }
    if replaced:
        logger.warning(
            "init_from's adapter sets " + ", ".join(f"{name}={adapter[name]}" for name in replaced)
            + " (the config's " + ", ".join(f"{name}={value}" for name, value in replaced.items())
            + " are not used): a continued adapter keeps its shape."
        )
    for name, value in adapter.items():
        setattr(training_args, name, value)


#: the ``Trainer`` arguments DVITrainer sets itself or would not read, and what it reads instead
UNREAD_ARGUMENTS = {
    "model": "it trains the LoRA head of drafter= (a DVIDrafter of target_model; by default a new one from "
             "args' exit_layer and LoRA settings)",
    "data_collator": "it batches the prompts itself (collate_prompts)",
    "optimizers": "the LoRA head steps with the online updater's AdamW, set by DVIConfig's learning_rate, "
                  "weight_decay, adam_beta1/2 and adam_epsilon",
    "eval_dataset": "it has no evaluation loop: measure the saved adapter's acceptance with "
                    "examples/dvi_acceptance.py --adapters <output_dir>",
}


class DVITrainer(SpecTrainer):
    """Trains a DVI LoRA draft head by running its online loop over a prompt stream.

    Each step generates the step's prompts with the target and the online drafter (exactly
    the ``generate(..., assistant_model=drafter)`` path of serving, which logs the accept/reject
    records), then calls the drafter's :meth:`~DVIDrafter.update` once per prompt, the same
    updater the online loop triggers by itself (with ``update_every > 0`` the trainer leaves
    updates to that trigger). The ``Trainer`` supplies the data loop, the learning-rate
    schedule, logging and checkpoints; its own optimizer step finds no gradients (the updater
    consumed them). Saves write the peft adapter (safetensors), ``config.json``, the model
    card and ``training_config.json``; no pickled training arguments.

    Args:
        target_model: the target (frozen; it never trains). It is moved to ``args.device`` and
            enabled for speculative ``generate``.
        args: the :class:`DVIConfig`.
        train_dataset: prompts as ``{"input_ids": [token ids]}`` records (chat template applied);
            with ``args.rollout="replay"`` also ``"completion_ids"``, the target's greedy answer.
        drafter: a :class:`DVIDrafter` of ``target_model`` to continue training; by default a new
            one from ``args`` (``exit_layer``, LoRA). Its online config is replaced by ``args``'.
        policy: draft policy; ``StaticTreePolicy.chain(args.draft_depth)`` by default.
        dataset_name: training data, as named in the model card.
        reproduce_command: command recorded in the model card.
        base_model: Hub id of the target, named in the card's metadata (default: the target's name when it is a
            Hub id; a target loaded from a local folder is named by its path in the card's text only).
        init_from: the adapter ``drafter`` was loaded from (folder or Hub id), named in the card as the run's start.
    """

    trainer_kind: ClassVar[str] = "dvi"
    config_class = DVIConfig

    _tag_names: ClassVar[list[str]] = ["hf-adaptive-spec", "dvi", "speculative-decoding"]
    _name = "DVI"
    _paper: ClassVar[dict[str, str | None]] = {
        "title": "Draft, Verify, & Improve: Toward Training-Aware Speculative Decoding",
        "id": None,  # no arXiv id known to us
    }

    def __init__(
        self,
        target_model: PreTrainedModel,
        args: DVIConfig,
        train_dataset,
        drafter: DVIDrafter | None = None,
        policy: DraftPolicy | None = None,
        dataset_name: str | None = None,
        reproduce_command: str | None = None,
        base_model: str | None = None,
        init_from: str | None = None,
        **kwargs,
    ):
        check_base_model(base_model)
        self.check_args(args)
        refuse_unread_arguments(type(self).__name__, kwargs, UNREAD_ARGUMENTS)
        target_model = enable(target_model.to(args.device).eval())
        if drafter is not None:
            adopt_adapter_settings(args, drafter)
        if drafter is None:
            set_seed(args.seed)  # the new LoRA head's random weights: the run's seed's (the Trainer seeds after)
            drafter = DVIDrafter(target_model, args.exit_layer, lora_config=args.lora_config())
        updater = drafter.enable_online(args.online_config())
        self.target_model = target_model
        self.drafter = drafter
        self.policy = policy or StaticTreePolicy.chain(args.draft_depth)
        self.card_names = CardNames(base_model, None, dataset_name, reproduce_command)  # an adapter's card: no drafter
        self.init_from = init_from
        # where init_from's schedule was continued (continue_schedule_from)
        self._continued_at_update: int | None = None
        self._logged_updates = 0
        self._first_agreements: list[float] = []  # completion_greedy_agreement of the first replayed answers
        self.replay = None
        if args.rollout == "replay":
            chain = isinstance(self.policy, StaticTreePolicy) and self.policy.config.top_k == 1
            if not chain or self.policy.config.sample_drafts:
                raise ValueError(
                    "DVIConfig(rollout='replay') replays greedy chains: use the default policy or "
                    "StaticTreePolicy.chain(depth), or rollout='generate' for other policies."
                )
            self.replay = GreedyChainReplay(
                target_model, drafter, self.policy.config.depth, args.max_new_tokens, end_of_sequence_ids(target_model)
            )
        super().__init__(
            model=drafter.head,
            args=args,
            train_dataset=train_dataset,
            data_collator=collate_prompts,
            optimizers=(updater.optimizer, None),
            **kwargs,
        )
        self.add_callback(SamplesDrawn())  # the prompts the card says it trained on

    def training_step(
        self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: torch.Tensor | int | None = None
    ) -> torch.Tensor:
        """Generate (or replay) each prompt with the online drafter, update after each; returns the updates' mean
        loss."""
        self.drafter.head.eval()  # shared target modules stay in eval mode; LoRA dropout runs inside updates
        if self.replay is not None and "completion_ids" not in inputs:
            raise ValueError(
                "DVIConfig(rollout='replay') needs 'completion_ids' (the target's greedy answers) in the dataset."
            )
        for index, ids in enumerate(inputs["input_ids"]):
            if self.replay is not None:
                stats = self.replay.run(ids, inputs["completion_ids"][index])
                self._note_greedy_agreement(self.replay.last_greedy_agreement)
            else:
                prompt = torch.tensor([ids], device=self.args.device)
                self.target_model.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    max_new_tokens=self.args.max_new_tokens,
                    do_sample=False,
                    assistant_model=self.drafter,
                    assistant_policy=self.policy,
                )
                stats = self.target_model.last_speculation
            self.step_metrics["mean_accepted_tokens"].append(stats.mean_accepted_tokens)
            drafted = sum(stats.draft_depths)
            self.step_metrics["acceptance_rate"].append(sum(stats.accepted_lengths) / drafted if drafted else 0.0)
            if self.args.update_every == 0:
                self.drafter.update()
        self.count_samples(len(inputs["input_ids"]))
        return torch.tensor(self._collect_update_metrics(), device=self.args.device)

    def _note_greedy_agreement(self, agreement: float) -> None:
        """Log a replayed answer's ``completion_greedy_agreement``; once ``AGREEMENT_CHECK_ANSWERS`` answers are in,
        warn if their mean is below ``LOW_GREEDY_AGREEMENT`` (the replay then walks text the target would not write)."""
        self.step_metrics["completion_greedy_agreement"].append(agreement)
        first = self._first_agreements
        if len(first) == AGREEMENT_CHECK_ANSWERS:
            return
        first.append(agreement)
        mean = sum(first) / len(first)
        if len(first) == AGREEMENT_CHECK_ANSWERS and mean < LOW_GREEDY_AGREEMENT:
            logger.warning(
                f"The first {AGREEMENT_CHECK_ANSWERS} replayed answers are the target's greedy choice at {mean:.0%} "
                "of their tokens on average (completion_greedy_agreement): they are not this target's own greedy "
                "output as tokens (another model's, sampled, another dtype, or text that re-encodes otherwise), so the "
                "replay judges drafts against text the target would not write. Regenerate them with this target "
                "(trainers/regenerate_sharegpt.py --model ...), or train with rollout: generate."
            )

    def _collect_update_metrics(self) -> float:
        updater = self.drafter.updater
        count = min(updater.num_updates - self._logged_updates, len(updater.history))
        new = list(updater.history)[-count:] if count else []
        self._logged_updates = updater.num_updates
        for metrics in new:
            for name in _LOGGED_UPDATE_FIELDS:
                self.step_metrics[name].append(getattr(metrics, name))
        self.step_metrics["buffer_records"].append(float(len(updater.buffer)))
        return sum(m.loss for m in new) / len(new) if new else 0.0

    def _clip_grad_norm(self, model: nn.Module) -> None:
        """No norm of the Trainer's: its optimizer step finds no gradients (the updater stepped and cleared them inside
        the training step, clipping at max_grad_norm), so its norm was 0 at every step; the log's ``grad_norm`` is the
        updates' own (``UpdateMetrics.grad_norm``, before clipping), absent from a log window with no update."""
        return None

    def _get_grad_norm(self, model: nn.Module, grad_norm=None) -> None:
        """See :meth:`_clip_grad_norm`."""
        return None

    def train(self, *args, **kwargs):
        """:meth:`SpecTrainer.train`, refusing a run that ends with no LoRA update (:meth:`_check_updated`)."""
        output = super().train(*args, **kwargs)
        self._check_updated()
        return output

    def _check_updated(self) -> None:
        """Refuse a run whose adapter no update changed, before it is saved: as the EAGLE-3 and PPOW scripts refuse
        data with no answer to train, rather than save an untrained artifact under a card that says it trained. The
        rollouts logged no accept/reject record (no prompt gave a drafting cycle), or ``update_every`` fresh records
        never came."""
        updater = self.drafter.updater
        if updater.num_updates > (self._continued_at_update or 0) or not self.state.global_step:
            return
        drawn = self.samples_drawn().phrase("prompts")
        if updater.skipped_updates:
            cause = (f"all {updater.skipped_updates} updates were skipped, their loss, gradients or step not finite "
                     "(a warning named the first). Lower learning_rate (--learning_rate, now "
                     f"{self.args.learning_rate})")
        elif updater.buffer.total_added:
            cause = (f"update_every={self.args.update_every} fresh records never came ({updater.num_fresh} were "
                     "logged). Lower update_every, or train on more prompts")
        else:
            cause = ("no prompt gave a drafting cycle to learn from (its answer empty or one token long, or cut "
                     f"there by max_new_tokens={self.args.max_new_tokens}). Train on answers longer than one token, "
                     "or raise max_new_tokens")
        raise ValueError(
            f"DVI made no LoRA update in {self.state.global_step} steps {drawn}, so the adapter is untouched and is "
            f"not saved: {cause}."
        )

    def save_artifact(self, output_dir: str) -> None:
        """The adapter, its card and ``dvi_online_state.json`` (the drafter's, being online)."""
        self.drafter.save_pretrained(output_dir, model_card_kwargs=self.card_kwargs())

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        """A checkpoint's optimizer and scheduler (``Trainer``'s), and the online learner's rollout state
        (``dvi_rollout_state.safetensors``: the buffer, the fresh-record mark and the sampling generator), which the
        next updates draw from as much as from the optimizer's moments."""
        super()._save_optimizer_and_scheduler(output_dir)
        if self.args.should_save:
            self.drafter.save_rollout_state(output_dir)

    def checkpoint_artifact_type(self) -> str:
        """The drafter's: a checkpoint holds the adapter (its ``config.json``), not the head ``Trainer`` steps."""
        return self.drafter.artifact_type

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: nn.Module | None = None) -> None:
        """Resume: the LoRA weights (safetensors), the schedule position and baseline, and the rollout state.

        The optimizer and scheduler states come back through ``Trainer`` (``optimizer.pt``, which is the updater's
        optimizer); with the rollout buffer and generator the resumed run makes the updates an uninterrupted one makes.
        A checkpoint written before the rollout state was saved resumes on an empty buffer, as a warning says.
        """
        self.drafter.load_adapter_weights(resume_from_checkpoint)
        if self.drafter.load_online_state(resume_from_checkpoint):
            self._logged_updates = self.drafter.updater.num_updates
        if not self.drafter.load_rollout_state(resume_from_checkpoint):
            logger.warning(
                f"{resume_from_checkpoint} has no {ROLLOUT_STATE_NAME} (written before DVI checkpoints saved their "
                "rollout buffer, or with save_only_model): the resumed run starts with an empty buffer and a new "
                "sampling generator, so its updates differ from an uninterrupted run's."
            )

    def continue_schedule_from(self, path_or_repo: str) -> None:
        """Continue the KL->RL schedule position and reward baseline saved beside a DVI adapter
        (``dvi_online_state.json``, which this trainer writes), as ``init_from`` does by default; a
        warning says when the adapter has none and the schedule starts again with KL-only updates."""
        if not self.drafter.load_online_state(path_or_repo):
            warn_schedule_restarts(path_or_repo, self.drafter.updater.config,
                                   "pass --warmup_updates 0 --ramp_updates 0 to train at the schedule's final weights "
                                   "from the first update")
            return
        updater = self.drafter.updater
        self._logged_updates = self._continued_at_update = updater.num_updates
        logger.info(
            f"Continuing {path_or_repo}'s KL->RL schedule at update {updater.num_updates} "
            f"(baseline {updater.baseline})."
        )

    def model_card(self) -> ModelCard:
        """The adapter's card (what ``Trainer.push_to_hub`` uploads: transformers' own card needs a transformers
        model)."""
        return self.drafter.generate_model_card(repo_id=self.hub_model_id, **self.card_kwargs())

    def card_kwargs(self, results: tuple[CardResult, ...] = ()) -> dict[str, Any]:
        """Model-card fields (``model_cards/dvi_adapter.md``): target, data, start, steps, command, results."""
        updater = self.drafter.updater
        schedule = "KL only" if self.args.ce_weight == 0 and self.args.pg_weight == 0 else "KL->RL schedule"
        return {
            **self.card_names.card_fields(),  # base_model None: the drafter's card names the target by its Hub id
            "results": results,
            "description": (
                f"Draft path: the target's first {self.drafter.exit_layer} layers. {self._start_description()}Trained "
                f"online {self.samples_drawn().phrase('prompts')} "
                f"({updater.num_updates - (self._continued_at_update or 0)} LoRA updates"
                + (f", {updater.num_updates} with the starting adapter's" if self._continued_at_update else "")
                + f", {schedule}, chains of {self.args.draft_depth}; "
                + ("cycles replayed from the target's greedy answers)." if self.replay else "cycles run by generate).")
            ),
        }

    def _start_description(self) -> str:
        """The card's sentence on what the run started from ("" for a new adapter)."""
        if not self.init_from:
            return ""
        start = f"Started from the DVI adapter {self.init_from}"
        if self._continued_at_update is None:
            return f"{start}, with a new KL->RL schedule. "
        return f"{start}, continuing its KL->RL schedule at update {self._continued_at_update}. "
