"""Replaying a policy that changes ``top_k``: one exact recording per ``top_k`` of the same generations.

A :class:`~hf_adaptive_spec.environments.ReplayRecording` is exact for one ``top_k`` only. Greedy
generation commits the same tokens whatever the tree, so recordings of the same prompts with
different ``top_k`` hold the same generations; :class:`MultiReplayEnvironment` asks the policy
for its tree at each cycle and replays the cycle on the recording of that ``top_k``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator

from ..policies.base import CycleState, DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo
from ..profiling.hardware import HardwareProfile
from .recorded import ReplayRecording, check_same_models
from .replay import ReplayedCycle, ReplayEnvironment, ReplayLoop

logger = logging.getLogger(__name__)


class _Chosen(DraftPolicy):
    """``policy`` with its tree already chosen for this cycle."""

    def __init__(self, policy: DraftPolicy, config: TreeConfig):
        self.policy, self.config = policy, config

    def tree_config(self, state: CycleState) -> TreeConfig:
        return self.config

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        return self.policy.continue_drafting(step)

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        return self.policy.num_tokens_to_verify(info)


def _common_length(recordings: list[ReplayRecording], prompt: int) -> int:
    """Positions of ``prompt`` at which every recording holds the same generation (none where the prompt's ids, as
    the recordings that keep them hold them, differ: another prompt, whatever tokens its generation shares)."""
    if len({tuple(r.prompt_ids[prompt]) for r in recordings if r.prompt_ids}) > 1:
        return 0
    trees_per_recording = [r.prompts[prompt] for r in recordings]
    length = min(len(trees) for trees in trees_per_recording)
    first = trees_per_recording[0]
    for position in range(length):
        reference = (first[position].context_length, first[position].target_next[0])
        if any((t[position].context_length, t[position].target_next[0]) != reference for t in trees_per_recording):
            return position
    return length


def _check_same_generations(recordings: list[ReplayRecording]) -> None:
    """Refuse recordings that cannot hold the same generations: another length limit (the lookup chain's room and
    where generations end), vocabulary or end tokens."""

    def settings(recording: ReplayRecording) -> tuple:
        return recording.max_new_tokens, recording.vocab_size, tuple(sorted(set(recording.eos_token_ids)))

    by_top_k = {recording.tree_config.top_k: settings(recording) for recording in recordings}
    if len(set(by_top_k.values())) > 1:
        raise ValueError(
            "The recordings were made with different settings (max_new_tokens, vocab size, eos tokens), by top_k: "
            f"{by_top_k}. A policy that switches top_k replays the same generations on each: record every top_k with "
            "the same target, --max-new-tokens and prompts."
        )


class MultiReplayEnvironment(ReplayLoop):
    """Replay environments keyed by ``top_k``, over the same recorded generations.

    States (``CycleState``) come from one reference recording (the one with the most feature
    layers, then the smallest ``top_k``), so a policy sees the same state whichever ``top_k``
    it picks. Where recordings disagree on a generation (a near-tie flipped by float noise),
    the prompt is cut at the first disagreement, with a warning. Recordings of different
    lengths (the same seeded prompt order, more prompts in some) are replayed on the prompts
    they all hold.

    Args:
        recordings: one :class:`ReplayRecording` per ``top_k``, of the same prompts and target.
        profile: the hardware cost profile used for draft and verify times.
        lookup_tokens / lookup_ngram_size: the prompt-lookup branch grafted onto every tree
            (:class:`ReplayEnvironment`'s; 0 tokens: none).
    """

    prompts_named = "the {} prompts the recordings share"

    def __init__(
        self,
        recordings: Iterable[ReplayRecording],
        profile: HardwareProfile,
        lookup_tokens: int = 0,
        lookup_ngram_size: int = 2,
    ):
        recordings = list(recordings)
        _check_same_generations(recordings)
        check_same_models(recordings, "replayed as one environment")
        self.environments: dict[int, ReplayEnvironment] = {}
        for recording in recordings:
            top_k = recording.tree_config.top_k
            if top_k in self.environments:
                raise ValueError(f"Two recordings have top_k={top_k}: pass one recording per top_k.")
            self.environments[top_k] = ReplayEnvironment(recording, profile, lookup_tokens, lookup_ngram_size)
        if not self.environments:
            raise ValueError("MultiReplayEnvironment needs at least one recording.")
        self.profile = profile
        self.lookup_tokens, self.lookup_ngram_size = lookup_tokens, lookup_ngram_size
        chains: dict = {}  # the replayed positions hold the same prompt and generation on every recording (lengths)
        for environment in self.environments.values():
            environment.lookup_chains = chains  # so a cycle's state and its replay on another top_k find it once
        ordered = [env.recording for _, env in sorted(self.environments.items())]
        counts = sorted({len(r.prompts) for r in ordered})
        if len(counts) > 1:  # the recorder's prompt order is seeded: the shorter recordings hold a prefix
            logger.warning("The recordings hold %s prompts: replaying the first %d, common to all.", counts, counts[0])
        self.reference = max(ordered, key=lambda r: (len(r.feature_layers), -r.tree_config.top_k))
        self.lengths = [_common_length(ordered, p) for p in range(counts[0])]
        if len(ordered) > 1 and not any(self.lengths):
            raise ValueError(
                "The recordings share no generation: each prompt differs from its first position. A policy that "
                "switches top_k replays the same generations on each: record every top_k from the same prompts "
                "(the same --prompts, --start and --seed) with the same target."
            )
        for p, length in enumerate(self.lengths):
            if length < len(self.reference.prompts[p]):
                logger.warning("Recordings disagree on prompt %d from position %d: replaying up to there.", p, length)

    @property
    def num_prompts(self) -> int:
        return len(self.lengths)

    def num_positions(self, prompt: int) -> int:
        return self.lengths[prompt]

    def check_actions(self, actions: Iterable[TreeConfig]) -> None:
        """Raise, naming the recordings to make, unless every action replays exactly."""
        missing = [action for action in actions if not self._replays(action)]
        if missing:
            recorded = {k: env.recording.tree_config for k, env in sorted(self.environments.items())}
            raise ValueError(
                f"{len(missing)} actions are outside the recordings (e.g. {missing[0]}); recorded: {recorded}. "
                "Record one recording per top_k, of the same prompts, for each config in policy.required_recordings() "
                "(`hf-adaptive-spec record --top-k K --depth D --total-tokens T ...`)."
            )

    def _replays(self, action: TreeConfig) -> bool:
        if action.depth == 0:  # a plain step reads no recorded tree: any recording replays it
            return True
        if action.top_k not in self.environments:
            return False
        try:
            self.environments[action.top_k].check_config(action)
        except ValueError:
            return False
        return True

    @property
    def feature_layers(self) -> tuple[int, ...]:
        return self.reference.feature_layers

    def state(self, prompt: int, position: int, feature_layers: Iterable[int] | None = None) -> CycleState:
        """What a policy reading ``feature_layers`` sees at the cycle starting at ``position`` of ``prompt``: those of
        the reference recording's features (None: all of them) and the length of the prompt-lookup chain the cycle
        grafts (as ``generate`` passes it)."""
        chain = self.environments[self.reference.tree_config.top_k].lookup_chain(prompt, position)
        return self.reference.prompts[prompt][position].cycle_state(len(chain), feature_layers)

    def states(self, prompts: Iterable[int]) -> Iterator[CycleState]:
        """Every recorded cycle state of ``prompts``."""
        for prompt in prompts:
            for position in range(self.lengths[prompt]):
                yield self.state(prompt, position)

    def replay_cycle(
        self, prompt: int, position: int, policy: DraftPolicy, unread_tokens: int | None = None
    ) -> ReplayedCycle:
        """The cycle at ``position`` of ``prompt``, on the recording of the ``top_k`` the policy picks
        (``unread_tokens``: see :meth:`ReplayLoop.replay_cycle`)."""
        self.check_prompt(prompt)
        if not 0 <= position < self.lengths[prompt]:
            raise ValueError(f"position {position} is outside the {self.lengths[prompt]} cycle starts the recordings "
                             f"share for prompt {prompt}: give 0 to {self.lengths[prompt] - 1}.")
        tick = time.perf_counter()
        config = policy.tree_config(self.state(prompt, position, policy.feature_layers))
        policy_time = time.perf_counter() - tick
        if not isinstance(config, TreeConfig):
            raise ValueError(f"The policy's tree_config returned {config!r}; expected a TreeConfig.")
        # a plain step (depth 0) drafts nothing, whatever its top_k: it replays on any recording, as generate runs it
        top_k = self.reference.tree_config.top_k if config.depth == 0 else config.top_k
        if top_k not in self.environments:
            raise ValueError(f"The policy asked for {config!r}, but no recording has its top_k (see check_actions).")
        environment = self.environments[top_k]
        cycle = environment.replay_cycle(prompt, position, _Chosen(policy, config), unread_tokens)
        cycle.policy_time += policy_time
        return cycle
