"""Clipped PPO with GAE, written once and shared by the LTD and Re-SpS trainers.

TRL 1.16 has no PPO trainer for non-LM policies; this module is the algorithm only (no
environment, no data loop): a :class:`RolloutBatch` of transitions, :func:`gae` advantages and
:func:`ppo_loss`, the clipped surrogate plus value and entropy terms. Trainers call
:func:`ppo_loss` on minibatches and let ``Trainer`` / ``accelerate`` do backward and the step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...policies.distributions import masked_categorical


@dataclass
class RolloutBatch:
    """Transitions of a categorical policy, ``N`` rows.

    Args:
        observations: ``[N, obs_dim]``.
        actions: ``[N]`` chosen action indices.
        log_probs: ``[N]`` log-probabilities of ``actions`` when they were sampled.
        values: ``[N]`` critic values at sampling time.
        rewards: ``[N]`` rewards received after each action.
        dones: ``[N]`` 1.0 where the episode ended with this transition.
        action_masks: optional ``[N, num_actions]`` bool, False for actions that were not allowed.
    """

    observations: torch.Tensor
    actions: torch.LongTensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    action_masks: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.actions.shape[0]

    def select(self, index: torch.LongTensor) -> RolloutBatch:
        mask = None if self.action_masks is None else self.action_masks[index]
        return RolloutBatch(
            self.observations[index], self.actions[index], self.log_probs[index], self.values[index],
            self.rewards[index], self.dones[index], mask,
        )


def gae(
    rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float, lam: float, last_value: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimates and returns over a time-ordered rollout.

    ``A_t = δ_t + γλ(1 − done_t) A_{t+1}`` with ``δ_t = r_t + γ(1 − done_t) V_{t+1} − V_t``;
    ``V`` after the last row is ``last_value``. Returns ``(advantages, returns = A + V)``.
    """
    rewards, values, dones = rewards.detach(), values.detach(), dones.detach()
    advantages = torch.zeros_like(rewards, dtype=torch.float32)
    next_value, running = float(last_value), 0.0
    for t in range(rewards.shape[0] - 1, -1, -1):
        not_done = 1.0 - float(dones[t])
        delta = float(rewards[t]) + gamma * not_done * next_value - float(values[t])
        running = delta + gamma * lam * not_done * running
        advantages[t] = running
        next_value = float(values[t])
    return advantages, advantages + values.float()


def check_ppo_settings(config: str, clip_range: float, gamma: float, gae_lambda: float) -> None:
    """Refuse PPO settings that train another objective without a word: a clip range of 0 pins every ratio at 1 and
    a negative one at ``1 − ε`` (``clamp`` with min above max), and a discount or GAE λ outside ``[0, 1]`` weights
    later rewards up or flips their sign."""
    if not clip_range > 0:
        raise ValueError(f"{config}.clip_range must be > 0 (PPO's ratio clip epsilon, e.g. 0.2), got {clip_range}.")
    for name, value in (("gamma", gamma), ("gae_lambda", gae_lambda)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{config}.{name} must be in [0, 1], got {value}.")


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, clip_range: float) -> torch.Tensor:
    """PPO's elementwise ``min(ρA, clip(ρ, 1−ε, 1+ε)A)`` (to be maximised)."""
    return torch.min(ratio * advantages, ratio.clamp(1 - clip_range, 1 + clip_range) * advantages)


@dataclass
class PPOLoss:
    """The loss to minimise and its parts (detached floats) for logging."""

    loss: torch.Tensor
    policy_loss: float
    value_loss: float
    entropy: float
    approx_kl: float
    clip_fraction: float


def _check_rows(
    batch: RolloutBatch, logits: torch.Tensor, values: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor
) -> None:
    """Refuse shapes that broadcast into a silently wrong loss: a critic's ``[N, 1]`` values against ``[N]`` returns
    made an ``[N, N]`` value loss (every value regressed on every return), ``[N, 1]`` advantages an ``[N, N]``
    surrogate."""
    rows = len(batch)
    vectors = {"values": values, "advantages": advantages, "returns": returns, "batch.actions": batch.actions,
               "batch.log_probs": batch.log_probs}
    wrong = {name: tuple(tensor.shape) for name, tensor in vectors.items() if tuple(tensor.shape) != (rows,)}
    if logits.ndim != 2 or logits.shape[0] != rows:
        wrong["logits"] = tuple(logits.shape)
    if wrong:
        raise ValueError(
            f"ppo_loss needs logits [N, actions] and values, advantages, returns, actions and log-probabilities [N] "
            f"for the batch's N = {rows} rows; got {wrong}. Return the critic's values as [N] (squeeze its last "
            "dimension) and pass one advantage and one return per row."
        )


def ppo_loss(
    actor_critic: nn.Module,
    batch: RolloutBatch,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    clip_range: float = 0.2,
    value_coef: float = 0.5,
    entropy_coef: float = 0.0,
    normalize_advantages: bool = True,
) -> PPOLoss:
    """PPO's clipped objective on one minibatch.

    ``actor_critic(observations)`` must return ``(logits [N, A], values [N])``. The loss is
    ``-min(ρA, clip(ρ, 1±ε)A) + c_v (V − R)² − c_e H`` averaged over rows.
    """
    logits, values = actor_critic(batch.observations)
    _check_rows(batch, logits, values, advantages, returns)
    distribution = masked_categorical(logits, batch.action_masks)
    log_probs = distribution.log_prob(batch.actions)
    if normalize_advantages and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    ratio = torch.exp(log_probs - batch.log_probs)
    policy_loss = -clipped_surrogate(ratio, advantages, clip_range).mean()
    value_loss = (values.float() - returns).pow(2).mean()
    entropy = distribution.entropy().mean()
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    with torch.no_grad():
        log_ratio = log_probs - batch.log_probs
        approx_kl = float(((torch.exp(log_ratio) - 1) - log_ratio).mean())
        clip_fraction = float(((ratio - 1).abs() > clip_range).float().mean())
    return PPOLoss(
        loss, float(policy_loss.detach()), float(value_loss.detach()), float(entropy.detach()), approx_kl, clip_fraction
    )


def minibatches(size: int, minibatch_size: int, generator: torch.Generator) -> list[torch.LongTensor]:
    """A random partition of ``range(size)`` into minibatches (the last may be smaller)."""
    order = torch.randperm(size, generator=generator)
    return [order[i : i + minibatch_size] for i in range(0, size, minibatch_size)]
