"""``PPOWTrainer``: window-level RL post-training of an EAGLE-3 drafter (TRL conventions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from transformers import DynamicCache, PreTrainedModel

from ...drafters.eagle3.modeling import Eagle3DraftModel
from ...profiling.hardware import HardwareProfile
from ...profiling.identity import check_profiled
from ..eagle3.trainer import Eagle3Trainer
from ..rl import clipped_surrogate, group_relative_advantages
from .config import PPOWConfig
from .drafting import draft_windows, first_draft_step
from .rewards import window_rewards
from .verification import WindowVerifier, accepted_prefix_lengths
from .windows import criticality_scores, hard_window_fraction, select_prefixes, window_priorities


@dataclass
class WindowRollout:
    """One batch of sampled windows with everything the policy update needs.

    Args:
        input_ids: ``[B, S]`` conversations; ``features`` their target features.
        prefixes: ``[B, P]`` draft positions the windows start from.
        tokens: ``[B, P, G, W]`` drafted windows (draft-vocabulary ids).
        log_probs: ``[B, P, G, W]`` their log-probabilities when sampled.
        target_log_probs: ``[B, P, G, W, draft_vocab]`` the target's log-distribution over the draft
            vocabulary at each window token (the KL anchor).
        advantages: ``[B, P, G]`` group-relative advantages.
    """

    input_ids: torch.LongTensor
    features: torch.Tensor
    prefixes: torch.LongTensor
    tokens: torch.LongTensor
    log_probs: torch.Tensor
    target_log_probs: torch.Tensor
    advantages: torch.Tensor


def window_starts(loss_mask: torch.Tensor, window_size: int) -> torch.Tensor:
    """``[B, S] → [B, S − 1]`` bool: draft positions ``t`` whose data window ``t + 2 .. t + 1 + W``
    lies wholly in assistant tokens (the windows PPOW may sample at)."""
    counts = torch.nn.functional.pad(loss_mask.long().cumsum(dim=-1), (1, 0))
    length = loss_mask.shape[1] - 1
    start = torch.arange(length, device=loss_mask.device) + 2
    end = (start + window_size).clamp(max=loss_mask.shape[1])
    inside = counts[:, end] - counts[:, start.clamp(max=loss_mask.shape[1])]
    return (inside == window_size) & (start + window_size <= loss_mask.shape[1])


def has_window(loss_mask: Sequence[int], window_size: int) -> bool:
    """Whether a conversation has a draft position PPOW can sample at (:func:`window_starts`): ``window_size`` assistant
    tokens in a row after its first two."""
    return len(loss_mask) > 0 and bool(window_starts(torch.tensor([list(loss_mask)]), window_size).any())


def check_windows(dataset: Any, window_size: int, name: str) -> None:
    """Refuse a dataset (or a dict of datasets) of conversations (rows with a ``loss_mask``) holding one where no window
    fits: :func:`~hf_adaptive_spec.training.ppow.select_prefixes` stops training at the first batch that draws it. A
    dataset without a length (a stream) is not read."""
    for part in dataset.values() if isinstance(dataset, Mapping) else [dataset]:
        if not isinstance(part, Sized):
            continue
        windowless = [i for i in range(len(part)) if not has_window(part[i]["loss_mask"], window_size)]
        if windowless:
            raise ValueError(
                f"{len(windowless)} of the {len(part)} conversations of the {name} (indices {windowless[:5]}) have "
                f"no {window_size} assistant tokens in a row after their first two: PPOW samples windows only there, "
                "and training would stop at the first batch holding one. Drop them (the PPOW script does, with "
                "has_window) or lower window_size."
            )


def profiled_relative_cost(profile_path: str, target_model: PreTrainedModel, drafter_name_or_path: str | None) -> float:
    """``c`` measured by the hardware profile at ``profile_path``: its draft-step time over its one-token verification
    time. A profile that timed another target or drafter is refused (its costs are another pair's)."""
    profile = HardwareProfile.load(profile_path)
    check_profiled(profile, profile_path, model=target_model, drafter=drafter_name_or_path)
    if profile.draft_step_seconds is None:
        raise ValueError(f"{profile_path} has no draft_step_seconds: profile it with a drafter.")
    return profile.draft_step_seconds / profile.verify_time(1)


class PPOWTrainer(Eagle3Trainer):
    """Post-trains an :class:`Eagle3DraftModel` with PPOW against a frozen target.

    Each step: one target forward over the batch's conversations; ADAW picks ``num_prefixes``
    prefixes per conversation; the drafter samples ``num_generations`` windows of ``window_size``
    tokens at each; one target forward verifies them all (chains on the conversation's cache);
    window rewards become group-relative advantages; the loss is the clipped surrogate (every
    token of a window shares its advantage) plus ``beta · KL(drafter ‖ target)``.
    Saves, cards and checkpoints are :class:`Eagle3Trainer`'s (SpecForge layout, safetensors).

    Args:
        model: the supervised drafter to post-train.
        args: the :class:`PPOWConfig`. Its ``hardware_profile`` must have timed ``target_model`` and the drafter
            ``drafter_name_or_path`` names (:func:`~hf_adaptive_spec.profiling.identity.check_profiled`).
        target_model: the frozen target.
        drafter_name_or_path: the checkpoint ``model`` was loaded from (folder or Hub id): checked against the
            hardware profile's drafter and named in the card (unset: neither).
        **kwargs: :class:`Eagle3Trainer`'s (``dataset_name``, ``reproduce_command``, ``base_model``, ``Trainer``'s).
    """

    trainer_kind: ClassVar[str] = "ppow"
    config_class = PPOWConfig

    _tag_names: ClassVar[list[str]] = ["hf-adaptive-spec", "eagle3", "ppow", "speculative-decoding"]
    _name = "PPOW"
    _paper: ClassVar[dict[str, str]] = {
        "title": "Performance-Driven Policy Optimization for Speculative Decoding with Adaptive Windowing"
    }
    _target_features_class = WindowVerifier
    #: the policy loss is each micro-batch's mean over its windows (the same count per conversation), which ``Trainer``
    #: divides by the accumulation steps: not the training-time-test loss Eagle3Trainer normalises over them
    normalises_over_accumulation: ClassVar[bool] = False

    def __init__(
        self,
        model: Eagle3DraftModel,
        args: PPOWConfig,
        target_model: PreTrainedModel,
        drafter_name_or_path: str | None = None,
        **kwargs,
    ):
        self.check_args(args)
        for name in ("train_dataset", "eval_dataset"):
            check_windows(kwargs.get(name), args.window_size, name)
        super().__init__(model=model, args=args, target_model=target_model, **kwargs)
        self.drafter_name_or_path = drafter_name_or_path
        self.relative_cost = args.drafter_cost
        if args.hardware_profile:
            self.relative_cost = profiled_relative_cost(args.hardware_profile, target_model, drafter_name_or_path)
        self._rollouts: dict[int, WindowRollout] = {}
        self._micro_step = 0

    def _feature_cache(self, target_model: PreTrainedModel, layer_ids: list[int]) -> None:
        """None: PPOW's target pass keeps a KV cache for verifying each step's sampled windows, so it runs every
        step."""
        return None

    def _d2t(self, model) -> torch.LongTensor:
        return self.accelerator.unwrap_model(model).d2t

    @torch.no_grad()
    def sample_rollout(self, model, inputs: dict[str, torch.Tensor]) -> WindowRollout:
        """Sample, verify and score windows for one batch of conversations."""
        args, verifier = self.args, self.target_features
        input_ids, attention_mask = inputs["input_ids"], inputs["attention_mask"]
        passed = verifier.conversations(input_ids, attention_mask)
        cache = DynamicCache()
        first = first_draft_step(model, input_ids, passed.features, cache)
        valid = window_starts(inputs["loss_mask"] * attention_mask, args.window_size)
        hard_fraction = 0.0
        priorities = torch.zeros(valid.shape, device=valid.device)
        if args.use_adaw:
            target_logits = verifier.draft_vocab_logits(passed.final_hidden[:, 1:])
            priorities = window_priorities(criticality_scores(target_logits, first.logits), args.window_size)
            hard_fraction = hard_window_fraction(
                self.state.global_step / max(self.state.max_steps, 1), args.hard_window_schedule
            )
        prefixes = select_prefixes(priorities, valid, args.num_prefixes, hard_fraction)
        d2t = self._d2t(model)
        windows = draft_windows(
            model, first, cache, prefixes, args.num_generations, args.window_size, d2t, temperature=args.temperature
        )
        log_probs = windows.log_probs(args.temperature)
        verdicts = verifier.verify(passed, prefixes, windows.tokens + d2t[windows.tokens])
        accepted = accepted_prefix_lengths(verdicts, log_probs, args.acceptance)
        reference = verifier.greedy_log_likelihood(passed, prefixes, args.window_size)
        rewards = window_rewards(
            accepted, verdicts.token_log_probs.sum(-1), reference[..., None],
            window_size=args.window_size, relative_cost=self.relative_cost,
            tolerance=args.proximity_tolerance, scale=args.proximity_scale, use_proximity=args.use_proximity_reward,
        )
        advantages = group_relative_advantages(rewards.flatten(), args.num_generations).view(rewards.shape)
        self.step_metrics["accepted_length"].append(float(accepted.float().mean()))
        self.step_metrics["reward"].append(float(rewards.mean()))
        self.step_metrics["zero_accepted"].append(float((accepted == 0).float().mean()))
        # the speedup reward of L = 0 is 0, so a positive reward there is the proximity reward
        self.step_metrics["proximity_share"].append(float(((accepted == 0) & (rewards > 0)).float().mean()))
        self.step_metrics["hard_fraction"].append(hard_fraction)
        return WindowRollout(
            input_ids, passed.features, prefixes, windows.tokens, log_probs,
            torch.log_softmax(verdicts.draft_vocab_logits, dim=-1), advantages,
        )

    def _rollout_for(self, model, inputs: dict[str, torch.Tensor]) -> WindowRollout:
        """A fresh rollout every ``num_iterations`` optimizer steps (one per accumulation slot), else the buffered one;
        in evaluation always a fresh one of the evaluation batch, leaving the training buffer and count alone."""
        if not model.training:
            return self.sample_rollout(model, inputs)
        accumulation = self.args.gradient_accumulation_steps
        slot = self._micro_step % accumulation
        if (self._micro_step // accumulation) % self.args.num_iterations == 0 or slot not in self._rollouts:
            self._rollouts[slot] = self.sample_rollout(model, inputs)
            self.count_samples(len(inputs["input_ids"]))
        self._micro_step += 1
        return self._rollouts[slot]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        args = self.args
        rollout = self._rollout_for(model, inputs)
        cache = DynamicCache()
        first = first_draft_step(model, rollout.input_ids, rollout.features, cache)
        windows = draft_windows(
            model, first, cache, rollout.prefixes, args.num_generations, args.window_size, self._d2t(model),
            tokens=rollout.tokens, temperature=args.temperature,
        )
        log_q = windows.log_distributions(args.temperature)
        log_probs = windows.log_probs(args.temperature, log_q)
        ratio = torch.exp(log_probs - rollout.log_probs)
        advantages = rollout.advantages[..., None].expand_as(ratio)
        policy_loss = -clipped_surrogate(ratio, advantages, args.epsilon).mean()
        kl = (log_q.exp() * (log_q - rollout.target_log_probs)).sum(-1).mean()
        loss = policy_loss + args.beta * kl
        self.step_metrics["policy_loss"].append(float(policy_loss.detach()))
        self.step_metrics["kl"].append(float(kl.detach()))
        self.step_metrics["clip_fraction"].append(float(((ratio.detach() - 1).abs() > args.epsilon).float().mean()))
        return (loss, {"loss": loss}) if return_outputs else loss

    def _training_description(self) -> str:
        args = self.args
        start = f" from the EAGLE-3 drafter {self.drafter_name_or_path}" if self.drafter_name_or_path else ""
        parts = [
            f"Post-trained with PPOW{start} for {self.state.global_step} optimizer steps "
            f"{self.samples_drawn().phrase('conversations')}: "
            f"windows of {args.window_size} tokens, groups of {args.num_generations}, "
            f"{args.num_prefixes} prefixes per conversation, "
            f"{args.acceptance} acceptance, relative cost {self.relative_cost:.3f} ({self._relative_cost_source()}), "
            f"beta {args.beta}, clip {args.epsilon}",
            "proximity reward " + ("on" if args.use_proximity_reward else "off"),
            "ADAW " + (f"on (curriculum {args.hard_window_schedule})" if args.use_adaw else "off"),
        ]
        return "; ".join(parts) + "."

    def _relative_cost_source(self) -> str:
        if self.args.hardware_profile:
            return f"draft step over one-token verification in the hardware profile {self.args.hardware_profile}"
        return "the paper's, relative_cost unset" if self.args.relative_cost is None else "the relative_cost argument"
