"""PPO rollouts of a Re-SpS policy on replayed generations, served to ``Trainer`` as minibatches.

Like Stable-Baselines3's rollout buffer: a rollout is exactly ``n_steps`` decisions, and a
generation cut by the end of a rollout goes on in the next one (with the updated policy).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass

import torch

from ...environments import MultiReplayEnvironment
from ...policies.resps import ReSpSDecision, ReSpSPolicy
from ..rl import RolloutBatch, gae, minibatches
from .config import ReSpSConfig

STATE_NAME = "resps_rollouts_{rank}.json"


def _generator(*parts: object) -> torch.Generator:
    """A torch generator seeded from ``parts`` (independent streams for seeds, ranks and updates)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))


@dataclass
class StreamPosition:
    """Where a process's replay stream stands.

    Args:
        sweep: passes over the process's prompts so far (each pass has its own order).
        cursor: index, in this pass's order, of the prompt being replayed.
        position: cycle start within that prompt's generation.
        unread: committed tokens the drafter has not read at that cycle (None: the prompt's, at its start).
        updates: PPO updates collected so far.
        decision_seconds: time charged per decision (measured once, then kept).
    """

    sweep: int = 0
    cursor: int = 0
    position: int = 0
    unread: int | None = None
    updates: int = 0
    decision_seconds: float | None = None


class ReplayRollouts:
    """Replays ``policy`` on this process's prompts and yields PPO minibatches, forever.

    Each update: collect ``args.n_steps`` decisions in training mode, compute GAE advantages
    and returns, then yield ``args.ppo_epochs`` random passes of minibatches (dicts of
    :class:`RolloutBatch` fields plus ``advantages`` and ``returns``).

    Args:
        environment: the replay environment.
        policy: the policy being trained (the unwrapped module).
        prompts: this process's prompt indices.
        args: the training arguments.
        reward_fn: PPO rewards ``[N]`` of a rollout's decisions.
        metrics: where rollout statistics are appended (``SpecTrainer._metrics["train"]``: rollouts are training's).
        rank: this process's index, for its own random streams.
    """

    def __init__(
        self,
        environment: MultiReplayEnvironment,
        policy: ReSpSPolicy,
        prompts: Sequence[int],
        args: ReSpSConfig,
        reward_fn: Callable[[list[ReSpSDecision]], torch.Tensor],
        metrics: dict[str, list[float]],
        rank: int = 0,
    ):
        if not prompts:
            raise ValueError("This process has no prompts to replay: record more prompts than processes, each "
                             "generated past its first token (a generation that ends there has no cycle).")
        self.environment, self.policy, self.prompts, self.args = environment, policy, list(prompts), args
        self.reward_fn, self.metrics, self.rank = reward_fn, metrics, rank
        self.stream = StreamPosition(decision_seconds=args.decision_seconds)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        while True:
            batch, advantages, returns = self.collect()
            generator = _generator(self.args.seed, self.rank, "minibatches", self.stream.updates)
            self.stream.updates += 1
            for _ in range(self.args.ppo_epochs):
                for index in minibatches(len(batch), self.args.per_device_train_batch_size, generator):
                    rows = batch.select(index)
                    yield {
                        "observations": rows.observations,
                        "actions": rows.actions,
                        "log_probs": rows.log_probs,
                        "values": rows.values,
                        "rewards": rows.rewards,
                        "dones": rows.dones,
                        "advantages": advantages[index],
                        "returns": returns[index],
                    }

    def _order(self) -> list[int]:
        generator = _generator(self.args.seed, self.rank, "order", self.stream.sweep)
        return [self.prompts[i] for i in torch.randperm(len(self.prompts), generator=generator).tolist()]

    @torch.no_grad()
    def collect(self) -> tuple[RolloutBatch, torch.Tensor, torch.Tensor]:
        """Replay until ``n_steps`` decisions are complete; ``(batch, advantages, returns)``."""
        if self.stream.decision_seconds is None:
            self.stream.decision_seconds = self.measure_decision_seconds()
        policy, stream = self.policy, self.stream
        policy.train()
        order = self._order()
        decisions: list[ReSpSDecision] = []
        tokens = cycles = 0
        while len(decisions) < self.args.n_steps:
            prompt = order[stream.cursor]
            cycle = self.environment.replay_cycle(prompt, stream.position, policy, stream.unread)
            cycle.policy_time = stream.decision_seconds if policy.decided else 0.0
            policy.observe(cycle.feedback())
            tokens, cycles = tokens + cycle.committed_tokens, cycles + 1
            stream.position += cycle.accepted_length + 1
            stream.unread = cycle.unread_after()
            if stream.position >= self.environment.lengths[prompt]:
                policy.end_episode()
                stream.position, stream.cursor, stream.unread = 0, stream.cursor + 1, None
                if stream.cursor == len(order):
                    stream.sweep, stream.cursor = stream.sweep + 1, 0
                    order = self._order()
            decisions += policy.pop_decisions()
        batch = RolloutBatch(
            observations=torch.stack([d.observation for d in decisions]),
            actions=torch.tensor([d.action for d in decisions]),
            log_probs=torch.tensor([d.log_prob for d in decisions]),
            values=torch.tensor([d.value for d in decisions]),
            rewards=self.reward_fn(decisions).float(),
            dones=torch.tensor([1.0 if self.args.independent_decisions or d.done else 0.0 for d in decisions]),
        )
        last_value = 0.0
        if not batch.dones[-1]:  # the generation goes on in the next rollout: bootstrap from its next state
            state = self.environment.state(order[stream.cursor], stream.position)
            last_value = float(policy(policy.observation(state)[None])[1])
        args = self.args
        advantages, returns = gae(batch.rewards, batch.values, batch.dones, args.gamma, args.gae_lambda, last_value)
        self._log(decisions, tokens / cycles)
        return batch, advantages, returns

    def _log(self, decisions: list[ReSpSDecision], tau: float) -> None:
        actions = [self.policy.actions[d.action] for d in decisions]
        self.metrics["reward_tokens_per_second"].append(sum(d.reward for d in decisions) / len(decisions))
        self.metrics["tau"].append(tau)
        self.metrics["distinct_actions"].append(float(len({d.action for d in decisions})))
        for name in ("total_tokens", "depth", "top_k"):
            self.metrics[f"mean_{name}"].append(sum(getattr(a, name) for a in actions) / len(actions))

    def measure_decision_seconds(self, repeats: int = 51) -> float:
        """Median wall time of one inference-mode decision (state, actor, argmax) on a recorded state."""
        state = self.environment.state(self.prompts[0], 0)
        was_training = self.policy.training
        self.policy.eval()
        times = []
        for _ in range(repeats):
            self.policy.end_episode()
            tick = time.perf_counter()
            self.policy.tree_config(state)
            times.append(time.perf_counter() - tick)
        self.policy.end_episode()
        self.policy.train(was_training)
        return sorted(times)[len(times) // 2]

    def save(self, directory: str) -> None:
        """Write this process's stream position into a checkpoint folder."""
        path = os.path.join(directory, STATE_NAME.format(rank=self.rank))
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(asdict(self.stream), handle)

    def load(self, directory: str) -> None:
        """Restore this process's stream position from a checkpoint folder."""
        path = os.path.join(directory, STATE_NAME.format(rank=self.rank))
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path} is missing: resume with the same number of processes as the run that wrote the checkpoint."
            )
        with open(path, encoding="utf-8") as handle:
            self.stream = StreamPosition(**json.load(handle))
