"""``LTDTrainer``: LTD's collaborative PPO training of an :class:`LTDPolicy` on a replay environment."""

from __future__ import annotations

import functools
import os
from typing import Any, ClassVar

import torch
from huggingface_hub import ModelCard
from torch import nn
from torch.utils.data import DataLoader
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ...environments import ReplayedCycle, ReplayEnvironment, ReplayResult
from ...environments.replayed import committed_tokens
from ...hub import CardResult
from ...policies.ltd import LTDPolicy
from ...policies.serialization import lookup_generate_kwargs
from ...policies.static import static_tree_policy
from ..base import CardNames, SpecTrainer, check_branch_settings, lookup_branch_note
from ..rl import ppo_loss
from ..spec_trainer import refuse_unread_arguments
from .config import LTDConfig
from .phases import build_schedule, phase_at
from .rollout import PPOUpdates, ReplayRollouts, load_state, save_state

PAPER_URL = "https://openreview.net/forum?id=IK9cbzzXLt"
_LOSS_FIELDS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


#: the ``Trainer`` arguments LTDTrainer sets itself or would not read, and what it reads instead
UNREAD_ARGUMENTS = {
    "train_dataset": "it trains on replays of environment=, each process on its share of the recorded prompts",
    "eval_dataset": "pass the held-out replay environment as eval_environment=",
    "data_collator": "it batches its own rollouts into PPO minibatches of LTDConfig.minibatch_size decisions",
    "compute_metrics": "evaluate() replays eval_environment and logs its own tau and speedups; compute others "
                       "from trainer.replay()",
}


def _check_replays_policy(name: str, environment: ReplayEnvironment, policy: LTDPolicy) -> None:
    """Refuse, naming the argument, an ``environment`` that cannot replay ``policy``'s trees or prompt-lookup branch:
    checked before training, not found by the evaluation after it."""
    try:
        environment.check_config(policy.tree)
        check_branch_settings(policy, environment.lookup_tokens, ("lookup_feature", "lookup_first"))
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


class LTDTrainer(SpecTrainer):
    """Trains LTD's depth and size heads with PPO on exact replays of recorded generations.

    Each process replays its own share of the recording's prompts (rank ``r`` of ``W`` takes
    prompts ``r, r + W, …``); under ``torchrun`` the ``Trainer``'s DDP wrapper averages the
    gradients. A rollout replays whole cycles with :class:`PhasePolicy` until the phase's
    learning head took ``n_steps`` decisions; each optimizer step then applies one PPO
    minibatch (:func:`~hf_adaptive_spec.training.rl.ppo_loss`). Times are the profile's modelled
    draft and verification times, so training is deterministic for a given seed.

    Prompts whose generation ended at its first token (no cycle start) are left out, as the gym environments leave
    them out. ``train()`` ends with the policy in ``eval()`` mode, so ``trainer.policy`` decides as the saved and
    reloaded policy does (each head's argmax, no decision logged).

    Checkpoints hold the policy (``config.json`` + ``model.safetensors``, strict), the card, the
    ``Trainer``'s optimizer / scheduler / RNG states, and per process the replay cursor, the
    random generator and the unfinished rollout (``ltd_rollout_state_rank{r}.safetensors``):
    resuming continues exactly.

    Args:
        model: the :class:`LTDPolicy` to train; its tree must be inside the recording's.
        args: the :class:`LTDConfig`.
        environment: training replay environment.
        eval_environment: replayed greedily by :meth:`evaluate` (default: ``environment``);
            passed to ``Trainer`` as ``eval_dataset``, so ``eval_strategy`` works. Checked as
            ``environment`` is, before training: the policy's tree must be inside its recording's too.
        base_model / drafter_name / dataset_name / reproduce_command: the card's names (:class:`CardNames`).
    """

    trainer_kind: ClassVar[str] = "ltd"
    config_class = LTDConfig

    _tag_names: ClassVar[list[str]] = ["hf-adaptive-spec", "ltd", "speculative-decoding"]
    _name = "LTD"
    _paper: ClassVar[dict[str, str | None]] = {
        "title": "Learning To Draft: Adaptive Speculative Decoding with Reinforcement Learning",
        "id": None,  # ICLR 2026, OpenReview IK9cbzzXLt
    }

    def __init__(
        self,
        model: LTDPolicy,
        args: LTDConfig,
        environment: ReplayEnvironment,
        eval_environment: ReplayEnvironment | None = None,
        base_model: str | None = None,
        drafter_name: str | None = None,
        dataset_name: str | None = None,
        reproduce_command: str | None = None,
        **kwargs,
    ):
        self.check_args(args)
        refuse_unread_arguments(type(self).__name__, kwargs, UNREAD_ARGUMENTS)
        for name, replay in (("environment", environment), ("eval_environment", eval_environment)):
            if replay is not None:
                _check_replays_policy(name, replay, model)
        super().__init__(model=model, args=args, eval_dataset=eval_environment or environment, **kwargs)
        self.phases = build_schedule(args, model)
        generator = torch.Generator().manual_seed(args.seed + args.process_index)
        usable = environment.prompts_with_cycles(range(environment.num_prompts))
        shard = usable[args.process_index :: args.world_size]
        self.rollouts = ReplayRollouts(environment, shard, generator)
        self.updates: PPOUpdates | None = None
        self.card_names = CardNames(base_model, drafter_name, dataset_name, reproduce_command)
        self.card_results: tuple[CardResult, ...] = ()

    @property
    def policy(self) -> LTDPolicy:
        return self.accelerator.unwrap_model(self.model)

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        """:meth:`SpecTrainer.train`, ending with the policy in ``eval()`` mode: ``trainer.policy`` then decides as
        the saved and reloaded policy does (each head's argmax), not by sampling and logging decisions."""
        try:
            return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        finally:
            self.policy.eval()

    def get_train_dataloader(self) -> DataLoader:
        """One item per optimizer step of a rollout (the same on every process): an epoch is one rollout."""
        return DataLoader([{"update": i} for i in range(self.args.updates_per_rollout)], batch_size=1)

    def cycle_reward(self, cycle: ReplayedCycle) -> float:
        """LTD's reward: ``reward_scale × (accepted + 1) / (draft_time + verify_time)``, the tokens counted up to
        the generation's end (:attr:`ReplayedCycle.committed_tokens`)."""
        return self.args.reward_scale * cycle.committed_tokens / (cycle.draft_time + cycle.verify_time)

    def training_step(
        self, model: nn.Module, inputs: Any, num_items_in_batch: torch.Tensor | int | None = None
    ) -> torch.Tensor:
        """Apply the next PPO minibatch (collecting a rollout first when none is left)."""
        if self.updates is None or not self.updates.pending:
            self.updates = self._collect_rollout()
        batch, advantages, returns = self.updates.pop()
        out = ppo_loss(
            functools.partial(model, head=self.updates.head),
            batch,
            advantages,
            returns,
            clip_range=self.args.clip_range,
            value_coef=self.args.vf_coef,
            entropy_coef=self.args.ent_coef,
            normalize_advantages=self.args.normalize_advantage,
        )
        self.accelerator.backward(out.loss)
        for name in _LOSS_FIELDS:
            self.step_metrics[f"{self.updates.head}/{name}"].append(getattr(out, name))
        return out.loss.detach()

    def _collect_rollout(self) -> PPOUpdates:
        index, phase = phase_at(self.phases, self.state.global_step)
        rollout = self.rollouts.collect(self.policy, phase, self.args.n_steps, self.cycle_reward)
        cycles = rollout.cycles
        tokens = committed_tokens(cycles)
        self.step_metrics["phase"].append(float(index))
        self.step_metrics["reward"].append(sum(map(self.cycle_reward, cycles)) / len(cycles))
        self.step_metrics["tau"].append(tokens / len(cycles))
        self.step_metrics["tokens_per_second"].append(tokens / sum(c.draft_time + c.verify_time for c in cycles))
        self.step_metrics["draft_depth"].append(sum(c.draft_depth for c in cycles) / len(cycles))
        self.step_metrics["verified_tokens"].append(sum(c.verified_tokens for c in cycles) / len(cycles))
        args = self.args
        return PPOUpdates.from_rollout(
            rollout, args.gamma, args.gae_lambda, args.minibatch_size, args.ppo_epochs, self.rollouts.generator
        )

    def replay(self, environment: ReplayEnvironment | None = None) -> tuple[ReplayResult, ReplayResult]:
        """Greedy replays of ``(the policy, a static policy of the policy's full tree)``; the static tree is a
        :class:`LookupFirstPolicy` where the policy is ``lookup_first``."""
        environment = environment or self.eval_dataset
        policy = self.policy.eval()
        return environment.replay(policy), environment.replay(static_tree_policy(policy.tree, policy.lookup_first))

    def evaluate(
        self, eval_dataset: ReplayEnvironment | None = None, ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """Replay the greedy policy; log τ, tokens/s and speedups (over one-token decoding, modelled)
        of the policy and of the static full tree, and keep them for the model card."""
        environment = eval_dataset or self.eval_dataset
        learned, static = self.replay(environment)
        one_token = environment.profile.verify_time(1)
        metrics = {
            f"{metric_key_prefix}_tau": learned.mean_accepted_tokens,
            f"{metric_key_prefix}_tokens_per_second": learned.tokens_per_second,
            f"{metric_key_prefix}_speedup": learned.tokens_per_second * one_token,
            f"{metric_key_prefix}_static_tau": static.mean_accepted_tokens,
            f"{metric_key_prefix}_static_speedup": static.tokens_per_second * one_token,
        }
        profile = environment.profile
        self.card_results = (
            CardResult(
                benchmark=f"replay of {self.card_names.dataset_name or 'the training recording'} (modelled time)",
                tau=learned.mean_accepted_tokens,
                speedup=metrics[f"{metric_key_prefix}_speedup"],
                hardware=f"{profile.device}, {profile.dtype}, {profile.num_threads} threads",
            ),
        )
        self.log_evaluation(metrics, metric_key_prefix)
        return metrics

    def train_save_and_push(self) -> None:
        """Train (resuming if asked), evaluate by replay, save with the results in the card, push if asked."""
        self.train(resume_from_checkpoint=self.args.resume_from_checkpoint)
        self.evaluate()
        self.save_and_push()

    def save_artifact(self, output_dir: str) -> None:
        self.policy.save_pretrained(output_dir)
        self.create_model_card(output_dir)

    def _save_checkpoint(self, model: nn.Module, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        save_state(folder, self.args.process_index, self.rollouts, self.updates)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: nn.Module | None = None) -> None:
        """Resume: the policy weights (strict safetensors, :meth:`SpecTrainer._load_from_checkpoint`), then this
        process's replay state."""
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        self.updates = load_state(resume_from_checkpoint, self.args.process_index, self.rollouts)

    def model_card(self) -> ModelCard:
        """The policy's card (``model_cards/policy.md``)."""
        return self.policy.generate_model_card(**self.card_kwargs())

    def card_kwargs(self) -> dict[str, Any]:
        """Model-card fields: models, data, schedule, results and the command."""
        tree = self.policy.tree
        environment = self.rollouts.environment
        branch = lookup_branch_note(environment.lookup_tokens, environment.lookup_ngram_size, self.policy.lookup_first)
        return {
            **self.card_names.card_fields(),
            "usage_kwargs": lookup_generate_kwargs(environment.lookup_tokens, environment.lookup_ngram_size),
            "results": self.card_results,
            "paper_url": PAPER_URL,
            "description": (
                f"Trees up to depth {tree.depth}, top-k {tree.top_k}, verifying one of {self.policy.size_choices} "
                f"candidates. Trained with PPO for {self.state.global_step} minibatch updates of LTD's collaborative "
                f"schedule ({len(self.phases)} phases) on exact replays of recorded greedy generations, with "
                "draft and verification times from a measured hardware profile." + branch
            ),
        }
