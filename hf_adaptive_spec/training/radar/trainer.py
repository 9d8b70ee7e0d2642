"""``RadarTrainer``: RADAR's offline REINFORCE on a dataset of accepted-length distributions."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from huggingface_hub import ModelCard
from torch.distributions import Categorical

from ...policies.radar.policy import SKIP, STOP, RadarPolicy, draft_calls
from ...policies.serialization import lookup_generate_kwargs
from ...profiling.hardware import HardwareProfile
from ..base import CardNames, SpecTrainer, lookup_branch_note
from ..spec_trainer import refuse_unread_arguments
from .config import RadarConfig
from .data import RadarDataset


@dataclass(frozen=True)
class LatencyModel:
    """RADAR's cycle time ``t(k) = T_verify(n_k) + T_first + (k - 1) T_draft + n_p(k) T_policy`` for ``k`` draft calls.

    ``n_k`` is the number of tokens the cycle verifies (root included) and ``n_p(k)`` the policy
    calls: ``k`` when it stops early (one decision after each draft call), ``D - 1`` when it drafts
    all ``D`` levels (no decision follows the last call). With trees of equal size for every ``k`` this is RADAR's
    ``T_o + k T_d + n_p T_p``; here small ``k`` also verifies fewer tokens, as the engine does.

    Args:
        verify_seconds: ``[max_tokens + 1]``, ``T_verify(n)`` for ``n = 0 .. max_tokens``.
        draft_step_seconds: ``T_draft``, one draft call (one tree level) after the first.
        policy_step_seconds: ``T_policy``, one policy call.
        first_draft_seconds: ``T_first``, the first draft call, which also reads the committed tokens the drafter
            has not read (``HardwareProfile.draft_time``: the profile's catch-up table where it has one). RADAR
            drafts every cycle, so that is what the cycle before committed; the dataset holds single positions,
            so one token is charged, as ``ReplayEnvironment.replay_cycle`` does after the first position.
    """

    verify_seconds: torch.Tensor
    draft_step_seconds: float
    policy_step_seconds: float
    first_draft_seconds: float

    @classmethod
    def from_profile(
        cls, profile: HardwareProfile, max_tokens: int, policy_step_seconds: float | None = None
    ) -> LatencyModel:
        """Times from a hardware profile; ``policy_step_seconds`` defaults to its ``policy_call_seconds``."""
        if profile.draft_step_seconds is None:
            raise ValueError(
                "The hardware profile has no draft_step_seconds: run `hf-adaptive-spec profile` with a drafter."
            )
        policy_seconds = profile.policy_call_seconds if policy_step_seconds is None else policy_step_seconds
        if policy_seconds is None:
            raise ValueError(
                "The hardware profile has no policy_call_seconds: set policy_step_seconds "
                "(seconds per RADAR policy call)."
            )
        verify = torch.tensor([profile.verify_time(n) for n in range(max_tokens + 1)], dtype=torch.float64)
        return cls(verify, profile.draft_step_seconds, policy_seconds, profile.draft_time(1))

    def cycle_seconds(self, verified_tokens: torch.LongTensor) -> torch.Tensor:
        """Cycle times ``[..., D]`` (float64) from verified sizes ``[..., D]`` after ``k = 1 .. D`` draft calls."""
        depth = verified_tokens.shape[-1]
        calls = torch.arange(1, depth + 1, dtype=torch.float64, device=verified_tokens.device)
        verify = self.verify_seconds.to(verified_tokens.device)[verified_tokens]
        drafting = self.first_draft_seconds + (calls - 1) * self.draft_step_seconds
        return verify + drafting + calls.clamp(max=depth - 1) * self.policy_step_seconds

    def skip_seconds(self, verified_tokens: torch.LongTensor) -> torch.Tensor:
        """Times (float64) of cycles that skip after their first draft call: one call, one decision, and a
        verification of ``verified_tokens`` (the root; with the prompt-lookup branch, its chain too)."""
        verify = self.verify_seconds.to(verified_tokens.device)[verified_tokens]
        return verify + self.first_draft_seconds + self.policy_step_seconds


def speed_matrix(
    seconds: torch.Tensor, count_bonus_token: bool = True, max_accepted: int | None = None
) -> torch.Tensor:
    """Speeds ``[..., D, A + 1]``: ``speed[..., k - 1, a] = (a + 1) / t(k)`` (``a / t(k)`` without the bonus token)
    from cycle times ``[..., D]``, for ``a = 0 .. A``, ``A = max_accepted`` (default ``D``)."""
    num_accepted = (seconds.shape[-1] if max_accepted is None else max_accepted) + 1
    accepted = torch.arange(num_accepted, dtype=seconds.dtype, device=seconds.device)
    return (accepted + float(count_bonus_token)) / seconds[..., None]


def return_matrix(speed: torch.Tensor, alpha: float, beta: float, gamma: float) -> torch.Tensor:
    """RADAR's returns ``G[..., k - 1, a, t]`` ``[..., D, A, D - 1]`` from speeds ``[..., D, A]``.

    The episode that drafts ``k`` times and accepts ``a`` tokens takes decisions ``t = 0 ..
    min(k, D - 1) - 1``: reward ``-alpha`` for each continue, ``beta * speed[k - 1, a]`` at the
    last decision (the stop, or after ``D - 1`` continues the forced end, which also pays
    ``-alpha``), 0 afterwards. ``G_t = sum_s gamma^(s - t) r_s``.
    """
    depth = speed.shape[-2]
    decisions = torch.arange(depth - 1, device=speed.device)
    calls = torch.arange(1, depth + 1, device=speed.device)[:, None]
    continues = (decisions < calls - 1).to(speed.dtype)  # [D, T]
    last = (decisions == calls.clamp(max=depth - 1) - 1).to(speed.dtype)  # [D, T]
    rewards = -alpha * continues[:, None, :] + beta * speed[..., None] * last[:, None, :]
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(depth - 2, -1, -1):
        running = rewards[..., t] + gamma * running
        returns[..., t] = running
    return returns


def held_out_metrics(policy: RadarPolicy, dataset: RadarDataset, latency: LatencyModel) -> dict[str, float]:
    """Modelled throughput of the deterministic policy on ``dataset``, and of fixed numbers of draft calls.

    ``tokens_per_second`` = expected committed tokens (accepted + bonus) / modelled time, summed
    over the cycles; ``tokens_per_cycle`` is τ; ``best_static_tokens_per_second`` is the best fixed ``k``.
    A skipped cycle (``SKIP``) commits the dataset's skip outcome (one token, more when a
    prompt-lookup chain is accepted) in :meth:`LatencyModel.skip_seconds`; ``skip_fraction`` is the
    share of cycles skipped and ``plain_step_tokens_per_second`` the throughput of the same steps
    without drafting.
    """
    device = policy.lstm.weight_ih_l0.device
    actions = policy.decisions(dataset.beam_scores.to(device)).cpu()
    calls = draft_calls(actions)
    skipped = actions[:, 0] == SKIP
    depth = dataset.tree_config.depth
    tokens = dataset.accept_probs.double() @ torch.arange(dataset.max_accepted + 1, dtype=torch.float64) + 1  # [N, D]
    seconds = latency.cycle_seconds(dataset.verified_tokens)  # [N, D]
    skip_tokens = dataset.skip_accepted.double() + 1
    skip_seconds = latency.skip_seconds(dataset.skip_verified_tokens)
    rows = torch.arange(len(dataset))

    def throughput(k: torch.LongTensor, skip: torch.Tensor) -> float:
        committed = torch.where(skip, skip_tokens, tokens[rows, k - 1])
        return float(committed.sum() / torch.where(skip, skip_seconds, seconds[rows, k - 1]).sum())

    never = torch.zeros_like(skipped)
    static = [throughput(torch.full_like(calls, k), never) for k in range(1, depth + 1)]
    return {
        "tokens_per_second": throughput(calls, skipped),
        "mean_draft_calls": float(calls.double().mean()),
        "tokens_per_cycle": float(torch.where(skipped, skip_tokens, tokens[rows, calls - 1]).mean()),
        "skip_fraction": float(skipped.double().mean()),
        "full_depth_tokens_per_second": static[-1],
        "best_static_tokens_per_second": max(static),
        "plain_step_tokens_per_second": float(
            skip_tokens.sum() / latency.verify_seconds[dataset.skip_verified_tokens].sum()
        ),
    }


#: the ``Trainer`` arguments RadarTrainer sets itself or would not read, and what it reads instead
UNREAD_ARGUMENTS = {
    "compute_metrics": "evaluate() scores the deterministic policy on eval_dataset (held_out_metrics) and logs "
                       "those; compute others from held_out_metrics(policy, dataset, trainer.latency)",
}


class RadarTrainer(SpecTrainer):
    """Trains a :class:`RadarPolicy` with RADAR's offline REINFORCE (no baseline, no simulator rollouts).

    For each batch of recorded cycles the policy, teacher-forced over the cycle's beam scores,
    samples a continue/stop action per decision; ``k`` is the first stop (``D`` if none), an
    accepted length ``a`` is drawn from the cycle's distribution for ``k`` draft calls, and the
    loss is ``-sum_t log pi(a_t) G_t`` (mean over cycles) with ``G`` from :func:`return_matrix`
    (``G_t`` minus the batch's mean ``G_t`` with ``reward_baseline``).
    The held-out evaluation scores the deterministic policy (:func:`held_out_metrics`) and, with
    the default :class:`RadarConfig`, selects the best checkpoint by its tokens/s. Saves write
    ``config.json``, ``model.safetensors``, the policy card and ``training_config.json``.

    Args:
        model: the policy; its tree shape must be the dataset's.
        args: the :class:`RadarConfig`.
        train_dataset / eval_dataset: :class:`RadarDataset` records (``build_radar_dataset``).
        profile: the hardware profile behind the latency model.
        base_model / drafter_name / dataset_name / reproduce_command: the card's names (:class:`CardNames`).
    """

    trainer_kind: ClassVar[str] = "radar"
    config_class = RadarConfig

    _tag_names: ClassVar[list[str]] = ["hf-adaptive-spec", "radar", "speculative-decoding"]
    _name = "RADAR"
    _paper: ClassVar[dict[str, str | None]] = {
        "title": "RADAR: Accelerating Large Language Model Inference With RL-Based Dynamic Draft Trees",
        "id": None,  # no arXiv id known to us; code: github.com/minaduki-sora/RADAR
    }

    def __init__(
        self,
        model: RadarPolicy,
        args: RadarConfig,
        train_dataset: RadarDataset,
        profile: HardwareProfile,
        eval_dataset: RadarDataset | None = None,
        base_model: str | None = None,
        drafter_name: str | None = None,
        dataset_name: str | None = None,
        reproduce_command: str | None = None,
        **kwargs: Any,
    ):
        self.check_args(args)
        refuse_unread_arguments(type(self).__name__, kwargs, UNREAD_ARGUMENTS)
        if args.allow_skip != model.allow_skip:
            raise ValueError(
                f"RadarConfig.allow_skip={args.allow_skip} but the policy has allow_skip={model.allow_skip}: "
                "build the policy with the config's allow_skip."
            )
        for name, dataset in (("train_dataset", train_dataset), ("eval_dataset", eval_dataset)):
            if dataset is not None and dataset.tree_config != model.tree:
                raise ValueError(
                    f"The {name}'s tree {dataset.tree_config} differs from the policy's {model.tree}: build the policy "
                    "with the dataset's depth, top_k and total_tokens."
                )
            if dataset is not None and dataset.lookup_first != model.lookup_first:
                raise ValueError(
                    f"The {name} was built with lookup_first={dataset.lookup_first} but the policy has "
                    f"lookup_first={model.lookup_first}: a lookup-first policy is trained on the positions where the "
                    "prompt-lookup branch did not match, and only there. Build both with the same lookup_first."
                )
            if dataset is not None and dataset.lookup_kwargs() != train_dataset.lookup_kwargs():
                raise ValueError(
                    f"The eval_dataset's prompt-lookup branch {dataset.lookup_kwargs()} differs from the "
                    f"train_dataset's {train_dataset.lookup_kwargs()}: build both with the same lookup settings."
                )
        self.lookup_tokens, self.lookup_ngram_size = train_dataset.lookup_tokens, train_dataset.lookup_ngram_size
        max_tokens = model.tree.total_tokens + train_dataset.lookup_tokens  # a grafted chain adds up to its length
        self.latency = LatencyModel.from_profile(profile, max_tokens, args.policy_step_seconds)
        default_beta = 10.0 * (self.latency.draft_step_seconds + self.latency.policy_step_seconds)  # RADAR README
        self.beta = args.beta if args.beta is not None else default_beta
        self.profile_device = profile.device
        self.card_names = CardNames(base_model, drafter_name, dataset_name, reproduce_command)
        super().__init__(model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset, **kwargs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """REINFORCE on one batch: sample trajectories and accepted lengths, weight log-probs by returns."""
        scores, accept_probs = inputs["beam_scores"], inputs["accept_probs"]
        logits, _ = model(scores)  # [B, D - 1, A]
        distribution = Categorical(logits=logits.float())
        actions = distribution.sample()  # [B, D - 1]
        calls = draft_calls(actions)  # [B]
        rows = torch.arange(len(calls), device=calls.device)
        accepted = torch.multinomial(accept_probs[rows, calls - 1], 1).squeeze(-1)  # [B]
        seconds = self.latency.cycle_seconds(inputs["verified_tokens"])
        speed = speed_matrix(seconds, self.args.count_bonus_token, accept_probs.shape[-1] - 1)
        returns = return_matrix(speed, self.args.alpha, self.beta, self.args.gamma)[rows, calls - 1, accepted]
        if self.args.allow_skip:  # a skip ends the episode at once with the speed of its plain step
            skipped = actions[:, 0] == SKIP
            skip_speed = (inputs["skip_accepted"] + 1) / self.latency.skip_seconds(inputs["skip_verified_tokens"])
            skip_return = torch.zeros_like(returns)
            skip_return[:, 0] = self.beta * skip_speed
            returns = torch.where(skipped[:, None], skip_return, returns)
            accepted = torch.where(skipped, inputs["skip_accepted"], accepted)
            self.step_metrics["skip_probability"].append(float(distribution.probs[:, 0, SKIP].mean().detach()))
        num_decisions = actions.shape[-1]
        taken = torch.arange(num_decisions, device=calls.device) < calls.clamp(max=num_decisions)[:, None]  # [B, D - 1]
        weights = returns
        if self.args.reward_baseline:  # G_t minus the batch's mean G_t over the cycles that take decision t
            baseline = (returns * taken).sum(0) / taken.sum(0).clamp(min=1)
            weights = (returns - baseline) * taken
        loss = -(distribution.log_prob(actions) * weights.to(logits.dtype)).sum(-1).mean()
        if self.args.entropy_coef:
            loss = loss - self.args.entropy_coef * (distribution.entropy() * taken).sum(-1).mean()
        self.step_metrics["return"].append(float(returns[:, 0].mean()))
        self.step_metrics["draft_calls"].append(float(calls.float().mean()))
        self.step_metrics["accepted"].append(float(accepted.float().mean()))
        self.step_metrics["stop_probability"].append(float(distribution.probs[..., STOP].mean().detach()))
        return (loss, {"loss": loss}) if return_outputs else loss

    def evaluate(
        self,
        eval_dataset: RadarDataset | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """Score the deterministic policy on the held-out cycles (:func:`held_out_metrics`), on every rank."""
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        if dataset is None:
            raise ValueError("RadarTrainer.evaluate needs an eval_dataset (a held-out RadarDataset).")
        policy = self.accelerator.unwrap_model(self.model)
        metrics = {f"{metric_key_prefix}_{k}": v for k, v in held_out_metrics(policy, dataset, self.latency).items()}
        self.log_evaluation(metrics, metric_key_prefix)
        return metrics

    def save_artifact(self, output_dir: str) -> None:
        self.accelerator.unwrap_model(self.model).save_pretrained(output_dir)
        self.model_card().save(os.path.join(output_dir, "README.md"))

    def policy_step_source(self) -> str:
        """Where the latency model's policy call comes from, as the card says it."""
        if self.args.policy_step_seconds is None:
            return "the profile's measured policy_call_seconds"
        return "set by policy_step_seconds, not the profile's"

    def model_card(self) -> ModelCard:
        """The policy's card (``model_cards/policy.md``) through the policy's own ``generate_model_card``, as LTD's and
        Re-SpS's trainers write theirs (it rendered the template directly, and lost the line saying what the policy
        does, and the drafter and cost curve the policy records): tree, rewards, latency model, training budget."""
        policy, latency = self.accelerator.unwrap_model(self.model), self.latency
        tree = policy.tree
        extras = (", batch-mean baseline" if self.args.reward_baseline else "") + (
            f", entropy bonus {self.args.entropy_coef}" if self.args.entropy_coef else ""
        )
        skip = " After its first draft call it may also skip: verify no drafted token, a plain decoding step."
        best = self.state.best_metric
        selected = f" Best held-out modelled {self.args.metric_for_best_model} so far: {best:.2f}." if best else ""
        if best and policy.lookup_first:  # the dataset holds only the cycles where the branch did not match
            selected += " It counts the cycles where the prompt-lookup branch did not match (those the policy decides)."
        return policy.generate_model_card(
            **self.card_names.card_fields(),
            usage_kwargs=lookup_generate_kwargs(self.lookup_tokens, self.lookup_ngram_size),
            description=(
                f"RADAR: an LSTM over each draft step's top-{tree.top_k} beam scores decides after every draft call "
                f"whether to continue (at most {tree.depth} calls, {tree.total_tokens} verified tokens); it stops when "
                f"P(stop) > 0.5.{skip if policy.allow_skip else ''} Trained with offline REINFORCE (alpha "
                f"{self.args.alpha}, beta {self.beta:.4g}, gamma {self.args.gamma}{extras}) for "
                f"{self.state.global_step} steps on {len(self.train_dataset)} recorded cycles, "
                f"with the latency model of a {self.profile_device} profile (first draft call "
                f"{1000 * latency.first_draft_seconds:.2f} ms, each later one "
                f"{1000 * latency.draft_step_seconds:.2f} ms, policy call {1000 * latency.policy_step_seconds:.3f} ms, "
                f"{self.policy_step_source()})."
                + selected
                + lookup_branch_note(self.lookup_tokens, self.lookup_ngram_size, policy.lookup_first)
            ),
        )
