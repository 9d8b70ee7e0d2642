"""The DVI updater ("Improve"): LoRA updates of the draft head from the rollout buffer."""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from .buffer import DVIRecord, RolloutBuffer
from .config import DVIOnlineLearnerConfig
from .schedule import KLToRLSchedule, LossWeights

logger = logging.getLogger(__name__)


def kl_to_target(draft_logits: torch.Tensor, target_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over rows of ``KL(p_draft || softmax(target_logits / temperature))``; ``[N, V]`` inputs."""
    draft_log_probs = torch.log_softmax(draft_logits, dim=-1)
    target_log_probs = torch.log_softmax(target_logits / temperature, dim=-1)
    return (draft_log_probs.exp() * (draft_log_probs - target_log_probs)).sum(-1).mean()


def reward_masked_ce(draft_logits: torch.Tensor, tokens: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
    """``-mean log p_draft(a)`` over the accepted records (reward 1); 0 when there are none."""
    accepted = rewards > 0.5
    if not bool(accepted.any()):
        return draft_logits.sum() * 0.0
    log_probs = torch.log_softmax(draft_logits[accepted], dim=-1)
    return -log_probs.gather(-1, tokens[accepted, None]).mean()


def policy_gradient(
    draft_logits: torch.Tensor, tokens: torch.Tensor, rewards: torch.Tensor, baseline: float
) -> torch.Tensor:
    """REINFORCE with a baseline: ``-mean((r - b) * log p_draft(a))``."""
    log_probs = torch.log_softmax(draft_logits, dim=-1).gather(-1, tokens[:, None])[:, 0]
    return -((rewards - baseline) * log_probs).mean()


def entropy(draft_logits: torch.Tensor) -> torch.Tensor:
    """Mean entropy of ``softmax(draft_logits)``."""
    log_probs = torch.log_softmax(draft_logits, dim=-1)
    return -(log_probs.exp() * log_probs).sum(-1).mean()


@dataclass(frozen=True)
class UpdateMetrics:
    """What one update did (all floats are batch means)."""

    update: int
    loss: float
    kl: float
    ce: float
    pg: float
    entropy: float
    kl_weight: float
    ce_weight: float
    pg_weight: float
    baseline: float
    fresh_reward: float
    num_records: int
    num_fresh: int
    #: the LoRA gradients' total norm before clipping (NaN when the loss had none)
    grad_norm: float = math.nan
    #: the update was skipped, the adapter left as it was: its loss, gradients or step were not finite (the schedule
    #: position did not advance; a step that overflowed the adapter is undone, while the optimizer's step count and
    #: moments, from finite gradients, keep it)
    skipped: bool = False

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _seed_forked_rng(seed: int, cuda_devices: list[int]) -> None:
    """Seed the global RNGs that an update forked (the CPU's and ``cuda_devices``'): the fork gives back the caller's
    state afterwards, and a seed drawn from the updater's generator gives each update its own LoRA dropout masks
    (without it every update would restart from the same forked state and draw the same masks)."""
    torch.default_generator.manual_seed(seed)
    for index in cuda_devices:
        torch.cuda.default_generators[index].manual_seed(seed)


class DVIUpdater:
    """Steps the LoRA parameters of a draft head on records of the rollout buffer.

    Only parameters whose name contains ``lora_`` are optimised; gradients are taken with
    :func:`torch.autograd.grad` for those alone, so no ``.grad`` ever lands on shared target
    weights. Updates hold ``lock`` (the drafter holds it too while it reads the head), run
    with the global RNG state saved and restored (seeded inside from the updater's private generator, so that LoRA
    dropout draws new masks at each update), and work inside ``torch.inference_mode``.

    Args:
        head: module mapping ``[N, hidden]`` shallow states to ``[N, vocab]`` draft logits.
        target_lm_head: the target's (frozen) output projection, for the target logits.
        config: the :class:`DVIOnlineLearnerConfig`.
        lock: lock shared with the drafter; a new one by default.
    """

    def __init__(
        self,
        head: nn.Module,
        target_lm_head: nn.Module,
        config: DVIOnlineLearnerConfig,
        lock: threading.RLock | None = None,
    ):
        self.head = head
        self.target_lm_head = target_lm_head
        self.config = config
        self.lock = lock or threading.RLock()
        self.parameters = [param for name, param in head.named_parameters() if "lora_" in name]
        if not self.parameters:
            raise ValueError("The draft head has no LoRA parameters to update.")
        for param in self.parameters:
            param.requires_grad_(True)
        self.optimizer = torch.optim.AdamW(
            self.parameters,
            lr=config.learning_rate,
            betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_epsilon,
            weight_decay=config.weight_decay,
        )
        self.buffer = RolloutBuffer(config.buffer_size)
        self.schedule = KLToRLSchedule(config)
        self.generator = torch.Generator().manual_seed(config.seed)
        config.mark_learner_built()
        self.num_updates = 0
        self.baseline: float | None = None  # EMA of fresh rewards; starts at the first batch's mean
        self.history: deque[UpdateMetrics] = deque(maxlen=10_000)
        self._fresh_mark = 0  # buffer.total_added at the previous update
        self.skipped_updates = 0  # updates whose loss, gradients or step were not finite (nothing was written)

    @property
    def learning_rate(self) -> float:
        """The learning rate a continued learner runs at, which :meth:`state_dict` saves in the online config: the
        optimizer's (``optimizer.param_groups[0]["lr"]``, set there to change a running learner's rate), or under an
        lr scheduler (the trainer's ``lr_scheduler_type``) the schedule's base rate, its ``initial_lr``: a learner
        loaded with ``from_pretrained(..., online=True)`` runs at a constant rate, and a decayed schedule ends at 0."""
        group = self.optimizer.param_groups[0]
        return float(group.get("initial_lr", group["lr"]))

    def state_dict(self) -> dict[str, Any]:
        """The schedule position, the baseline and the online config (JSON, saved beside an adapter), its
        ``learning_rate`` the one the learner runs at (:attr:`learning_rate`), not the config's when it was built;
        the optimizer and the rollout state (:meth:`rollout_state`) are not included."""
        config = {**asdict(self.config), "learning_rate": self.learning_rate}
        return {"num_updates": self.num_updates, "baseline": self.baseline, "online_config": config}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the schedule and the baseline from :meth:`state_dict` (its config is the caller's to compare)."""
        self.num_updates = int(state["num_updates"])
        self.baseline = None if state.get("baseline") is None else float(state["baseline"])

    def rollout_state(self) -> dict[str, torch.Tensor]:
        """What the next updates draw from, as tensors (a training checkpoint's safetensors): the buffer's records,
        the records logged since the last update and the private generator's state (replay sampling and dropout).
        With :meth:`state_dict` and the optimizer's, a resumed run makes the updates an uninterrupted one makes."""
        return {
            **self.buffer.state_dict(),
            "fresh_mark": torch.tensor(self._fresh_mark, dtype=torch.int64),
            "generator_state": self.generator.get_state(),
        }

    def load_rollout_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`rollout_state` (the records onto the LoRA parameters' device)."""
        self.buffer.load_state_dict(state, self.parameters[0].device)
        self._fresh_mark = int(state["fresh_mark"])
        self.generator.set_state(state["generator_state"].cpu())

    @property
    def num_fresh(self) -> int:
        """Records logged since the previous update (some may have left the buffer)."""
        return self.buffer.total_added - self._fresh_mark

    def add(self, records: list[DVIRecord]) -> None:
        with self.lock:
            self.buffer.add(records)

    def due(self) -> bool:
        """Whether an automatic update is due (``update_every`` fresh records are waiting)."""
        return self.config.update_every > 0 and self.num_fresh >= self.config.update_every

    def step(self) -> UpdateMetrics | None:
        """One optimizer step of the LoRA parameters; None when the buffer is empty."""
        with self.lock:
            if not len(self.buffer):
                return None
            replay = self.buffer.sample(self.config.batch_size, self.generator)
            fresh = self.buffer.newest(min(self.num_fresh, self.config.batch_size))
            weights = self.schedule.weights(self.num_updates)
            device = self.parameters[0].device
            fork_devices = [device.index or 0] if device.type == "cuda" else []
            dropout_seed = int(torch.randint(2**62, (), generator=self.generator, device="cpu"))
            with torch.random.fork_rng(devices=fork_devices), torch.inference_mode(False), torch.enable_grad():
                _seed_forked_rng(dropout_seed, fork_devices)
                metrics = self._step(replay, fresh, weights, device)
            if metrics.skipped:
                self._note_skipped(metrics)
            else:
                self.history.append(metrics)
            return metrics

    def _note_skipped(self, metrics: UpdateMetrics) -> None:
        """Count an update skipped for a non-finite value, and warn at the first."""
        self.skipped_updates += 1
        if self.skipped_updates == 1:
            logger.warning(
                f"DVI's online update was skipped: its loss ({metrics.loss}), gradient norm ({metrics.grad_norm}) or "
                f"step was not finite, so nothing was written into the LoRA adapter (generation stays lossless; "
                f"later skipped updates are counted in drafter.updater.skipped_updates, not warned about). The likely "
                f"cause is the learning rate ({self.optimizer.param_groups[0]['lr']}): too high a rate makes the "
                "adapter's weights overflow. Lower DVIOnlineLearnerConfig.learning_rate (--learning_rate), or "
                "drafter.updater.optimizer.param_groups[0]['lr'] for a running learner."
            )

    def _step(self, replay: list[DVIRecord], fresh: list[DVIRecord], weights: LossWeights, device) -> UpdateMetrics:
        records = replay + fresh
        states = torch.stack([r.draft_state for r in records]).to(device)
        targets = torch.stack([r.target_state for r in records]).to(device)
        tokens = torch.tensor([r.token for r in records], device=device)
        rewards = torch.tensor([r.reward for r in records], device=device, dtype=torch.float32)
        dropouts = [m for name, m in self.head.named_modules() if "lora_dropout" in name]
        for module in dropouts:
            module.train()
        try:
            draft_logits = self.head(states).float()
        finally:
            for module in dropouts:
                module.eval()
        with torch.no_grad():
            target_logits = self.target_lm_head(targets).float()
        n = len(replay)
        fresh_rewards = rewards[n:]
        baseline = self.baseline if self.baseline is not None else (float(fresh_rewards.mean()) if fresh else 0.0)
        kl = kl_to_target(draft_logits[:n], target_logits[:n], self.config.kl_temperature)
        ce = reward_masked_ce(draft_logits[:n], tokens[:n], rewards[:n])
        pg = policy_gradient(draft_logits[n:], tokens[n:], fresh_rewards, baseline) if fresh else kl * 0.0
        ent = entropy(draft_logits[:n])
        loss = weights.kl * kl + weights.ce * ce + weights.pg * pg - weights.entropy * ent
        grad_norm, finite = math.nan, bool(torch.isfinite(loss))
        if loss.requires_grad and finite:
            grad_norm, finite = self._apply_gradients(loss)
        if fresh and finite:  # a skipped update writes nothing: the baseline and schedule stay where they were
            decay = self.config.baseline_decay
            self.baseline = decay * baseline + (1.0 - decay) * float(fresh_rewards.mean())
        self.num_updates += 1 if finite else 0
        self._fresh_mark = self.buffer.total_added  # a skipped update's records are not fresh at the next one either
        return UpdateMetrics(
            update=self.num_updates,
            loss=float(loss.detach()),
            kl=float(kl.detach()),
            ce=float(ce.detach()),
            pg=float(pg.detach()),
            entropy=float(ent.detach()),
            kl_weight=weights.kl,
            ce_weight=weights.ce,
            pg_weight=weights.pg,
            baseline=baseline,
            fresh_reward=float(fresh_rewards.mean()) if fresh else float("nan"),
            num_records=n,
            num_fresh=len(fresh),
            grad_norm=grad_norm,
            skipped=not finite,
        )

    def _apply_gradients(self, loss: torch.Tensor) -> tuple[float, bool]:
        """Step the LoRA parameters on ``loss``'s gradients; their total norm before clipping, and whether the step
        was taken: gradients that are not finite are not stepped on (the optimizer's moments would keep them), and the
        parameters of a step that left one of them not finite (too high a learning rate) are restored."""
        grads = torch.autograd.grad(loss, self.parameters, allow_unused=True)
        for param, grad in zip(self.parameters, grads):
            param.grad = torch.zeros_like(param) if grad is None else grad
        try:
            norms = [torch.linalg.vector_norm(param.grad.float()) for param in self.parameters]
            grad_norm = float(torch.linalg.vector_norm(torch.stack(norms)))
            if not math.isfinite(grad_norm):
                return grad_norm, False
            if self.config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(self.parameters, self.config.max_grad_norm)
            before = [param.detach().clone() for param in self.parameters]
            try:
                self.optimizer.step()
            except RuntimeError as error:  # a finite rate above float32's range (~3e38 / its moments) overflows
                if "overflow" not in str(error):
                    raise
            else:
                if all(bool(torch.isfinite(param).all()) for param in self.parameters):
                    return grad_norm, True
            with torch.no_grad():
                for param, kept in zip(self.parameters, before):
                    param.copy_(kept)
            return grad_norm, False
        finally:
            self.optimizer.zero_grad(set_to_none=True)
