"""``ReSpSTrainer``: PPO for the Re-SpS draft policy on exact replays of recorded generations (TRL conventions)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import torch
from huggingface_hub import ModelCard
from transformers import TrainerState
from transformers.trainer import TRAINER_STATE_NAME

from ...environments import MultiReplayEnvironment
from ...policies.base import TreeConfig
from ...policies.resps import ReSpSDecision, ReSpSPolicy
from ...policies.serialization import lookup_generate_kwargs
from ...policies.static import static_tree_policy
from ..base import CardNames, SpecTrainer, check_branch_settings, lookup_branch_note
from ..rl import RolloutBatch, ppo_loss
from ..spec_trainer import refuse_unread_arguments
from .config import ReSpSConfig
from .rollouts import ReplayRollouts

_LOSS_FIELDS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


#: the ``Trainer`` arguments ReSpSTrainer sets itself or would not read, and what it reads instead
UNREAD_ARGUMENTS = {
    "model": "pass the ReSpSPolicy to train as policy=",
    "data_collator": "it batches its own rollouts into PPO minibatches of per_device_train_batch_size "
                     "decisions",
    "compute_metrics": "evaluate() replays the policy on eval_dataset and logs its own speed metrics",
}


def _checked_prompts(environment: MultiReplayEnvironment, name: str, prompts: Iterable[int]) -> list[int]:
    """``prompts`` as a list, refused (naming ``name``) unless each indexes a prompt the recordings share: checked
    before training, not found by the evaluation after it."""
    prompts = list(prompts)
    for prompt in prompts:
        try:
            environment.check_prompt(prompt)
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
    return prompts


class ReSpSTrainer(SpecTrainer):
    """Trains a :class:`ReSpSPolicy` with PPO on replayed generations.

    Rollouts replay the policy in training mode (sampled actions, each held
    ``training_interval`` cycles) with the engine's own tree builder, on the recording of the
    ``top_k`` it picks; draft and verify times come from the hardware profile and each decision
    costs ``decision_seconds``. ``Trainer`` runs the optimisation: one step per PPO minibatch,
    gradient clipping, Adam, logging, checkpoints, and gradient averaging across processes,
    each replaying its own share of the prompts. :meth:`evaluate` replays the policy as
    deployed on the held-out prompts. Saves write the policy (``config.json``,
    ``model.safetensors``, model card) and ``training_config.json``; no pickled arguments.

    Prompts with no cycle start the recordings share (a generation that ended at its first token) are left out of
    the rollouts, as the gym environments leave them out. ``train()`` ends with the policy in ``eval()`` mode, so
    ``trainer.policy`` decides as the saved and reloaded policy does (argmax, held ``decision_interval`` cycles, no
    decision logged).

    Rewards (:meth:`compute_rewards`) are each decision's tokens per second divided by the
    profile's autoregressive speed, i.e. speedups: advantage normalisation makes the policy
    gradient scale-free anyway, and this keeps the value loss from dominating gradient clipping.

    Args:
        policy: the policy to train, e.g. ``ReSpSPolicy(hidden, layers, **args.policy_kwargs())``.
        args: the :class:`ReSpSConfig`.
        environment: replay environment with one recording per ``top_k`` of the policy's grid.
        train_dataset: prompt indices to train on (default: all recorded prompts).
        eval_dataset: held-out prompt indices for :meth:`evaluate`. Both are checked against the prompts the
            recordings share before training.
        fit_normalizer: first fit the policy's feature statistics on the training states
            (False when continuing from a trained policy).
        base_model / drafter_name / dataset_name / reproduce_command: the card's names (:class:`CardNames`).
    """

    trainer_kind: ClassVar[str] = "resps"
    config_class = ReSpSConfig

    _tag_names: ClassVar[list[str]] = ["hf-adaptive-spec", "resps", "speculative-decoding"]
    _name = "Re-SpS"
    _paper: ClassVar[dict[str, str | None]] = {
        "title": "Speculative Sampling with Reinforcement Learning",
        "id": None,  # AAAI 2026; code: github.com/wmd3i/ReSpS
    }

    def __init__(
        self,
        policy: ReSpSPolicy,
        args: ReSpSConfig,
        environment: MultiReplayEnvironment,
        train_dataset: Sequence[int] | None = None,
        eval_dataset: Sequence[int] | None = None,
        fit_normalizer: bool = True,
        base_model: str | None = None,
        drafter_name: str | None = None,
        dataset_name: str | None = None,
        reproduce_command: str | None = None,
        **kwargs,
    ):
        self.check_args(args)
        refuse_unread_arguments(type(self).__name__, kwargs, UNREAD_ARGUMENTS)
        environment.check_actions(policy.actions)
        check_branch_settings(policy, environment.lookup_tokens)
        train_prompts = _checked_prompts(environment, "train_dataset", range(environment.num_prompts)
                                         if train_dataset is None else train_dataset)
        eval_prompts = None if eval_dataset is None else _checked_prompts(environment, "eval_dataset", eval_dataset)
        if fit_normalizer:
            policy.fit_normalizer(environment.states(train_prompts))
        self.environment = environment
        self.autoregressive_tokens_per_second = 1.0 / environment.profile.verify_time(1)
        self.card_names = CardNames(base_model, drafter_name, dataset_name, reproduce_command)
        self.last_eval: tuple[float, float, TreeConfig] | None = None  # tokens/s, ratio to best static, best static
        self._best_static: dict[tuple[int, ...], tuple[TreeConfig, float]] = {}
        super().__init__(
            model=policy,
            args=args,
            train_dataset=train_prompts,
            eval_dataset=eval_prompts,
            **kwargs,
        )
        self.rollouts = ReplayRollouts(
            environment,
            policy,
            environment.prompts_with_cycles(train_prompts)[args.process_index :: args.world_size],
            args,
            self.compute_rewards,
            self._metrics["train"],
            rank=args.process_index,
        )

    @property
    def policy(self) -> ReSpSPolicy:
        return self.accelerator.unwrap_model(self.model)

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        """:meth:`SpecTrainer.train`, ending with the policy in ``eval()`` mode and its last training episode ended:
        ``trainer.policy`` then decides as the saved and reloaded policy does, not by sampling and logging
        decisions."""
        try:
            return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        finally:
            self.policy.eval()
            self.policy.end_episode()
            self.policy.pop_decisions()

    def get_train_dataloader(self) -> ReplayRollouts:
        """The rollout stream: PPO minibatches, collected on demand with the current weights."""
        return self.rollouts

    def compute_rewards(self, decisions: list[ReSpSDecision]) -> torch.Tensor:
        """PPO rewards ``[N]``: tokens per second of each decision's interval over autoregressive tokens per second."""
        return torch.tensor([d.reward for d in decisions]) / self.autoregressive_tokens_per_second

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        fields = ("observations", "actions", "log_probs", "values", "rewards", "dones")
        batch = RolloutBatch(*(inputs[name] for name in fields))
        args = self.args
        out = ppo_loss(
            model, batch, inputs["advantages"], inputs["returns"], args.clip_range, args.vf_coef, args.ent_coef,
            args.normalize_advantages,
        )
        for name in _LOSS_FIELDS:
            self.step_metrics[name].append(getattr(out, name))
        return (out.loss, {}) if return_outputs else out.loss

    # -- evaluation ------------------------------------------------------------------------------

    def best_static(self, prompts: Sequence[int]) -> tuple[TreeConfig, float]:
        """The fastest fixed action of the grid on ``prompts`` and its replayed tokens per second (cached); each
        action a :class:`LookupFirstPolicy` where the policy is ``lookup_first``."""
        key = tuple(prompts)
        if key not in self._best_static:
            lookup_first = self.policy.lookup_first
            speeds = {
                action: self.environment.replay(static_tree_policy(action, lookup_first), key).tokens_per_second
                for action in self.policy.actions
            }
            self._best_static[key] = max(speeds.items(), key=lambda item: item[1])
        return self._best_static[key]

    def evaluate(
        self, eval_dataset: Sequence[int] | None = None, ignore_keys=None, metric_key_prefix: str = "eval"
    ) -> dict[str, float]:
        """Replay the policy as deployed (eval mode) on held-out prompts; compare with the best fixed tree."""
        prompts = list(self.eval_dataset if eval_dataset is None else eval_dataset)
        policy = self.policy
        was_training = policy.training
        policy.eval()
        result = self.environment.replay(policy, prompts)
        policy.end_episode()
        policy.train(was_training)
        best_action, best_speed = self.best_static(prompts)
        speed = result.tokens_per_second
        prefix = metric_key_prefix
        metrics = {
            f"{prefix}_tokens_per_second": speed,
            f"{prefix}_speedup": speed / self.autoregressive_tokens_per_second,
            f"{prefix}_tau": result.mean_accepted_tokens,
            f"{prefix}_best_static_tokens_per_second": best_speed,
            f"{prefix}_vs_best_static": speed / best_speed,
            f"{prefix}_best_static_total_tokens": float(best_action.total_tokens),
            f"{prefix}_best_static_depth": float(best_action.depth),
            f"{prefix}_best_static_top_k": float(best_action.top_k),
        }
        self.last_eval = (speed, speed / best_speed, best_action)
        self.log_evaluation(metrics, metric_key_prefix)
        return metrics

    # -- saving and resuming ---------------------------------------------------------------------

    def save_artifact(self, output_dir: str) -> None:
        self.policy.save_pretrained(output_dir)
        self.create_model_card(output_dir)

    def _save_rng_state(self, output_dir: str) -> None:
        """Every process saves its RNG state here; it also saves its replay stream position."""
        super()._save_rng_state(output_dir)
        self.rollouts.save(output_dir)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        """Resume: the policy's weights (safetensors) and this process's replay stream position.

        Optimizer, scheduler and RNG states come back through ``Trainer``. A checkpoint taken inside a PPO update
        (the one ``Trainer`` writes at a ``max_steps`` that is no multiple of ``steps_per_update``) is refused: the
        rest of that update's rollout is not saved, and resuming would drop it.
        """
        step = TrainerState.load_from_json(os.path.join(resume_from_checkpoint, TRAINER_STATE_NAME)).global_step
        if step % self.args.steps_per_update:
            raise ValueError(
                f"{resume_from_checkpoint} was saved at step {step}, inside a PPO update of "
                f"{self.args.steps_per_update} steps (its max_steps is no multiple of them): resuming it would drop "
                "the rest of that update. Resume from an earlier checkpoint whose step is a multiple of "
                f"{self.args.steps_per_update}."
            )
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        self.rollouts.load(resume_from_checkpoint)

    def model_card(self) -> ModelCard:
        """The policy's card (``model_cards/policy.md``)."""
        return self.policy.generate_model_card(**self.card_kwargs())

    def _decision_cost(self) -> str:
        """The time charged per decision, as the card states it, and whether the run can be reproduced."""
        seconds = self.rollouts.stream.decision_seconds
        if self.args.decision_seconds is not None:
            return f"{1000 * seconds:.4g} ms (decision_seconds, fixed: runs with the same seed reproduce)"
        if seconds is None:
            return "a time measured when training starts"
        return (f"{1000 * seconds:.4g} ms, measured when training started (wall clock: a run with the same seed "
                f"measures anew; set decision_seconds={seconds!r} to reproduce it)")

    def card_kwargs(self) -> dict[str, Any]:
        """Model-card fields: target, drafter, data, command, and what was trained and measured."""
        policy, args = self.policy, self.args
        decide = "argmax" if policy.temperature == 0 else f"sampled at temperature {policy.temperature}"
        description = (
            f"Re-SpS policy over {len(policy.actions)} tree shapes (total_tokens, depth, top_k). State: the target's "
            f"hidden states {list(policy.feature_layers)} at the last committed token, concatenated "
            f"({policy.feature_mean.numel()} dims, standardised). An action ({decide}) is held "
            f"{policy.decision_interval} cycles. Trained with PPO on exact replays of recorded generations: "
            f"{self.rollouts.stream.updates} updates of {args.n_steps} decisions per process, each decision charged "
            f"{self._decision_cost()}."
        ) + lookup_branch_note(self.environment.lookup_tokens, self.environment.lookup_ngram_size, policy.lookup_first)
        if self.last_eval is not None:
            speed, ratio, best = self.last_eval
            description += (
                f" Replayed on held-out prompts with the training hardware profile: {speed:.1f} tokens/s, {ratio:.3f}x "
                f"the best fixed tree (total_tokens={best.total_tokens}, depth={best.depth}, top_k={best.top_k})."
            )
        return {
            **self.card_names.card_fields(),
            "usage_kwargs": lookup_generate_kwargs(self.environment.lookup_tokens, self.environment.lookup_ngram_size),
            "description": description,
            "title": "Re-SpS draft policy",
        }
