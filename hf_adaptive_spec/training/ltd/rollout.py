"""Rollouts for LTD: replay cycles of a recording and turn the learning head's decisions into PPO data.

One draft–verify cycle is one episode. The learning head's decisions in a cycle get reward 0,
except the last one (the stop decision, or the last continue before the depth cap), which gets
the cycle's reward and ends the episode.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ...environments import ReplayedCycle, ReplayEnvironment, ReplayRecording
from ...policies.ltd import Decision, LTDPolicy
from ..rl import RolloutBatch, gae, minibatches
from .phases import Phase, PhasePolicy

logger = logging.getLogger(__name__)


@dataclass
class Rollout:
    """``n_steps`` decisions of one head, the value to bootstrap from after them, and the cycles replayed."""

    head: str
    batch: RolloutBatch
    last_value: float
    cycles: list[ReplayedCycle]


def _batch(decisions: list[Decision], rewards: list[float], dones: list[float]) -> RolloutBatch:
    masks = [d.action_mask for d in decisions]
    return RolloutBatch(
        observations=torch.stack([d.observation for d in decisions]),
        actions=torch.tensor([d.action for d in decisions]),
        log_probs=torch.tensor([d.log_prob for d in decisions]),
        values=torch.tensor([d.value for d in decisions]),
        rewards=torch.tensor(rewards),
        dones=torch.tensor(dones),
        action_masks=None if masks[0] is None else torch.stack(masks),
    )


def generations_digest(recording: ReplayRecording) -> str:
    """A digest of the recorded generations a replay cursor walks (the prompts, and each cycle start's context length
    and committed token): a checkpoint's cursor resumes only on a recording of the same digest."""
    walked = [[(tree.context_length, tree.target_next[0]) for tree in trees] for trees in recording.prompts]
    return hashlib.blake2b(repr((recording.prompt_ids, walked)).encode(), digest_size=16).hexdigest()


class ReplayRollouts:
    """Walks some prompts of a recording cycle after cycle, as ``generate`` would, in a seeded
    shuffled order (reshuffled after each pass).

    Args:
        environment: the replay environment.
        prompts: the recording's prompt indices this process replays (its shard).
        generator: the source of every random choice: prompt order, sampled actions, random depths.
    """

    def __init__(self, environment: ReplayEnvironment, prompts: list[int], generator: torch.Generator):
        if not prompts:
            raise ValueError("This process has no prompts to replay: record at least one prompt per training process "
                             "whose generation goes past its first token (one that ends there has no cycle).")
        self.environment = environment
        self.recording_digest = generations_digest(environment.recording)
        self.prompts = prompts
        self.generator = generator
        self.order = self._shuffled()
        self.index = 0
        self.position = 0
        self.unread: int | None = None  # committed tokens the drafter has not read (None: the prompt, at its start)

    def _shuffled(self) -> list[int]:
        return [self.prompts[i] for i in torch.randperm(len(self.prompts), generator=self.generator).tolist()]

    def next_cycle(self, policy: PhasePolicy) -> ReplayedCycle:
        """Replay the cycle at the cursor and move the cursor past its committed tokens."""
        prompt = self.order[self.index]
        cycle = self.environment.replay_cycle(prompt, self.position, policy, self.unread)
        self.position += cycle.accepted_length + 1
        self.unread = cycle.unread_after()
        if self.position >= len(self.environment.recording.prompts[prompt]):
            self.index, self.position, self.unread = self.index + 1, 0, None
            if self.index == len(self.order):
                self.order, self.index = self._shuffled(), 0
        return cycle

    def collect(
        self, policy: LTDPolicy, phase: Phase, n_steps: int, reward: Callable[[ReplayedCycle], float]
    ) -> Rollout:
        """Replay whole cycles until ``phase.learner`` took ``n_steps`` decisions; keep the first ``n_steps``."""
        runner = PhasePolicy(policy, phase, self.generator)
        decisions: list[Decision] = []
        rewards: list[float] = []
        dones: list[float] = []
        cycles: list[ReplayedCycle] = []
        idle = 0  # cycles in a row where the learner was never asked
        while len(decisions) < n_steps:
            policy.decisions.clear()
            cycle = self.next_cycle(runner)
            cycles.append(cycle)
            taken = len(policy.decisions)
            idle = 0 if taken else idle + 1
            if idle > self.environment.recording.num_positions:
                raise ValueError(
                    f"The {phase.learner} head was never asked during a whole pass over the prompts (a depth cap of 1 "
                    "never asks the depth head; a lookup_first policy is not asked where every cycle matched): give "
                    "the policy a deeper tree, drop the depth phases or record less repetitive prompts."
                )
            if taken:
                decisions += policy.decisions
                rewards += [0.0] * (taken - 1) + [reward(cycle)]
                dones += [0.0] * (taken - 1) + [1.0]
        policy.decisions.clear()
        last_value = decisions[n_steps].value if dones[n_steps - 1] == 0.0 else 0.0
        kept = slice(0, n_steps)
        return Rollout(phase.learner, _batch(decisions[kept], rewards[kept], dones[kept]), last_value, cycles)

    def state_dict(self) -> dict:
        """The cursor (JSON): prompt order, prompt, position and the committed tokens the drafter has not read there,
        which a profile's catch-up table charges to the next cycle (without it a resumed run times that cycle
        otherwise)."""
        cursor = {"order": self.order, "index": self.index, "position": self.position, "unread": self.unread}
        return {**cursor, "recording": self.recording_digest}

    def check_cursor(self, state: dict, checkpoint: str) -> None:
        """Refuse a cursor :meth:`state_dict` wrote on another recording than this one: by the recording's digest, or,
        for a checkpoint written before the cursor held it, by whether the cursor walks this process's prompts."""
        saved = state.get("recording")
        if saved == self.recording_digest or (saved is None and self._walks_these_prompts(state)):
            return
        raise ValueError(
            f"{checkpoint} was saved by an LTD run on another recording (or other prompts) than this one's "
            f"{self.environment.num_prompts} prompts: its replay cursor (prompt order {state['order'][:8]}, position "
            f"{state['position']}) does not walk these generations. Resume with the recording it was trained on, or "
            "train afresh without resume_from_checkpoint."
        )

    def _walks_these_prompts(self, state: dict) -> bool:
        order, index, position = state["order"], state["index"], state["position"]
        if sorted(order) != sorted(self.prompts) or not 0 <= index < len(order):
            return False
        return 0 <= position < self.environment.num_positions(order[index])

    def load_state_dict(self, state: dict) -> None:
        self.order, self.index, self.position = state["order"], state["index"], state["position"]
        if "unread" not in state and self.position:
            logger.warning(
                "This LTD checkpoint was written before the replay cursor saved its unread tokens: the first cycle "
                "after resuming is timed as at a prompt's start, so with a profile's catch-up table the resumed run "
                "can differ from an uninterrupted one."
            )
        self.unread = state.get("unread")


@dataclass
class PPOUpdates:
    """One rollout's GAE targets and the minibatches still to apply, in order.

    Args:
        head: the head the rollout trains.
        batch: the rollout, ``N`` rows.
        advantages / returns: ``[N]`` from :func:`~hf_adaptive_spec.training.rl.gae`.
        pending: row indices of each minibatch not applied yet.
    """

    head: str
    batch: RolloutBatch
    advantages: torch.Tensor
    returns: torch.Tensor
    pending: list[torch.LongTensor] = field(default_factory=list)

    @classmethod
    def from_rollout(
        cls, rollout: Rollout, gamma: float, lam: float, minibatch_size: int, epochs: int, generator: torch.Generator
    ) -> PPOUpdates:
        batch = rollout.batch
        advantages, returns = gae(batch.rewards, batch.values, batch.dones, gamma, lam, rollout.last_value)
        pending = [index for _ in range(epochs) for index in minibatches(len(batch), minibatch_size, generator)]
        return cls(rollout.head, batch, advantages, returns, pending)

    def pop(self) -> tuple[RolloutBatch, torch.Tensor, torch.Tensor]:
        """The next minibatch: ``(batch, advantages, returns)``."""
        index = self.pending.pop(0)
        return self.batch.select(index), self.advantages[index], self.returns[index]

    def tensors(self) -> dict[str, torch.Tensor]:
        b = self.batch
        tensors = {
            "observations": b.observations, "actions": b.actions, "log_probs": b.log_probs, "values": b.values,
            "rewards": b.rewards, "dones": b.dones, "advantages": self.advantages, "returns": self.returns,
            "pending": torch.cat(self.pending), "pending_sizes": torch.tensor([len(i) for i in self.pending]),
        }
        if b.action_masks is not None:
            tensors["action_masks"] = b.action_masks
        return tensors

    @classmethod
    def from_tensors(cls, head: str, t: dict[str, torch.Tensor]) -> PPOUpdates:
        rows = [t[name] for name in ("observations", "actions", "log_probs", "values", "rewards", "dones")]
        batch = RolloutBatch(*rows, action_masks=t.get("action_masks"))
        pending = list(t["pending"].split(t["pending_sizes"].tolist()))
        return cls(head, batch, t["advantages"], t["returns"], pending)


def state_file(folder: str | Path, rank: int) -> Path:
    return Path(folder) / f"ltd_rollout_state_rank{rank}.safetensors"


def save_state(folder: str | Path, rank: int, rollouts: ReplayRollouts, updates: PPOUpdates | None) -> None:
    """Write this process's replay cursor, random generator and unfinished rollout (safetensors, no pickle)."""
    tensors = {"generator": rollouts.generator.get_state()}
    metadata = {"cursor": json.dumps(rollouts.state_dict()), "head": ""}
    if updates is not None and updates.pending:
        tensors.update({f"updates.{name}": value.contiguous() for name, value in updates.tensors().items()})
        metadata["head"] = updates.head
    Path(folder).mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(state_file(folder, rank)), metadata=metadata)


def load_state(folder: str | Path, rank: int, rollouts: ReplayRollouts) -> PPOUpdates | None:
    """Restore what :func:`save_state` wrote into ``rollouts``; returns the unfinished rollout, if any."""
    path = state_file(folder, rank)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: resume LTD training with as many processes as the run that wrote {folder}."
        )
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata()
    tensors = load_file(str(path))
    cursor = json.loads(metadata["cursor"])
    rollouts.check_cursor(cursor, str(folder))
    rollouts.generator.set_state(tensors.pop("generator"))
    rollouts.load_state_dict(cursor)
    if not metadata["head"]:
        return None
    prefix = "updates."
    updates = {name[len(prefix) :]: value for name, value in tensors.items() if name.startswith(prefix)}
    return PPOUpdates.from_tensors(metadata["head"], updates)
