"""Gymnasium environments over a replay recording, for any RL library (SB3, CleanRL, ...).

:class:`DraftStepEnv` makes each decision inside one draft/verify cycle a step (LTD: stop or
continue after each draft level, then optionally how many candidates to verify).
:class:`TreeConfigEnv` makes the tree configuration of the next N cycles a step (Re-SpS).

Both replay through :class:`ReplayEnvironment`, so the engine's own ``TreeBuilder`` builds every
tree. The builder calls its policy (callback style) while gymnasium is step style, so
:class:`DraftStepEnv` runs each cycle in a worker thread whose policy hooks hand the engine's
``DraftStepInfo`` / ``VerifySizeInfo`` to :meth:`DraftStepEnv.step` and wait for the action.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Protocol

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..core.values import check_number, plain_ints
from ..policies.base import CycleState, DraftStepInfo, TreeConfig
from ..policies.static import StaticTreePolicy
from ..profiling.hardware import HardwareProfile
from .recorded import ReplayRecording
from .replay import ReplayEnvironment
from .replayed import ReplayedCycle, committed_tokens
from .stepped_cycle import Question, SteppedCycle

Reward = Callable[[Sequence[ReplayedCycle]], float]


class Observer(Protocol):
    """Maps what the engine shows a policy to an observation in ``observation_space``."""

    observation_space: spaces.Box

    def __call__(self, info: Any) -> np.ndarray: ...


def tokens_per_second(cycles: Sequence[ReplayedCycle]) -> float:
    """Committed tokens per second of modelled draft + verify time (LTD's reward for one cycle).

    The policy's own time is left out: it is measured wall time, so it would make rewards noisy.
    """
    return committed_tokens(cycles) / sum(cycle.draft_time + cycle.verify_time for cycle in cycles)


class ScoreObservation:
    """``[phase, depth, context_length / 1000, scores...]`` (float32) for the decisions of one cycle.

    ``phase`` is 0 after a draft level (``DraftStepInfo``: its ``step_scores``) and 1 before
    verification (``VerifySizeInfo``: every candidate's score, ``depth`` the deepest level).
    Scores are cumulative draft log-probs, best first, clipped to ``[floor, 0]`` and padded
    with ``floor`` to ``num_scores`` (LTD observes the ``top_k**2`` scores of the latest level).
    """

    def __init__(self, num_scores: int, max_depth: int, max_context_length: int, floor: float = -30.0):
        self.num_scores, self.floor = num_scores, floor
        low = np.array([0.0, 0.0, 0.0] + [floor] * num_scores, dtype=np.float32)
        high = np.array([1.0, max_depth, max_context_length / 1000] + [0.0] * num_scores, dtype=np.float32)
        self.observation_space = spaces.Box(low, high, dtype=np.float32)

    def __call__(self, info: Question) -> np.ndarray:
        if isinstance(info, DraftStepInfo):
            phase, depth, scores = 0.0, info.depth, info.step_scores
        else:
            phase, depth, scores = 1.0, int(info.depths.max()), info.scores
        best = scores.float().sort(descending=True).values[: self.num_scores].clamp(self.floor, 0.0)
        padded = np.full(self.num_scores, self.floor, dtype=np.float32)
        padded[: len(best)] = best.numpy()
        head = np.array([phase, depth, info.context_length / 1000], dtype=np.float32)
        return np.concatenate([head, padded])


class FeatureObservation:
    """``[features of each layer..., context_length / 1000]`` (float32) from a :class:`CycleState`.

    Layers missing from the state (e.g. past the end of a generation) read as zeros.
    """

    def __init__(self, feature_layers: tuple[int, ...], hidden_size: int, max_context_length: int):
        self.feature_layers, self.hidden_size = feature_layers, hidden_size
        size = len(feature_layers) * hidden_size
        bound = np.finfo(np.float32).max
        low = np.array([-bound] * size + [0.0], dtype=np.float32)
        high = np.array([bound] * size + [max_context_length / 1000], dtype=np.float32)
        self.observation_space = spaces.Box(low, high, dtype=np.float32)

    def __call__(self, state: CycleState) -> np.ndarray:
        zeros = np.zeros(self.hidden_size, np.float32)
        parts = [
            state.features[layer].float().cpu().numpy() if layer in state.features else zeros
            for layer in self.feature_layers
        ]
        return np.concatenate(parts + [np.array([state.context_length / 1000], dtype=np.float32)])


def _checked_action(space: spaces.Discrete, action: int) -> int:
    if not space.contains(action):
        raise ValueError(f"Action {action!r} is outside the action space {space}: pass an int in [0, {space.n}).")
    return int(action)


#: what ``step`` says before a ``reset`` and after a terminated episode
NO_EPISODE = "No episode in progress: call reset() before step() and after a terminated episode."


def _check_option_keys(owner: str, options: dict[str, Any] | None, reads: tuple[str, ...], why: str = "") -> None:
    """Refuse ``options`` keys ``owner.reset`` does not read (a misspelt ``'postion'`` would replay another episode
    than the one asked for), naming the keys it reads; ``why`` says why a key that looks readable is not."""
    unread = sorted(set(options or ()) - set(reads), key=str)
    if unread:
        raise ValueError(f"{owner}.reset(options={options!r}) has keys it does not read: {unread}{why}. It reads "
                         f"{list(reads)}: pass only those.")


def _int_option(owner: str, options: dict[str, Any], name: str) -> int:
    """``options[name]`` of ``owner.reset`` (0 when left out), refused unless an int: ``int(1.9)`` would replay
    prompt 1 as the one asked for."""
    return int(check_number(f"{owner}.reset", f"options[{name!r}]", options.get(name, 0), integer=True))


def _checked_verify_sizes(
    verify_sizes: Sequence[int] | None, config: TreeConfig, profile: HardwareProfile
) -> list[int] | None:
    """``verify_sizes`` as ints, refused unless at least 2 candidate counts ``config`` can verify, each verified as
    asked: on a bucketed (static-path) profile the replay, as ``generate``, caps a tree to the largest bucket, so a
    larger size would silently verify fewer candidates than the agent picked."""
    if verify_sizes is None:
        return None
    sizes = plain_ints(verify_sizes)
    for index, size in enumerate(sizes):
        check_number("DraftStepEnv", f"verify_sizes[{index}]", size, integer=True,
                     meaning="a count of candidates to verify, the root excluded")
    if len(sizes) < 2 or not all(0 <= size < config.total_tokens for size in sizes):
        raise ValueError(
            f"verify_sizes {sizes} must be at least 2 candidate counts in [0, {config.total_tokens - 1}] (total_tokens "
            f"{config.total_tokens} includes the root): pass other sizes, a larger config, or no verify_sizes for a "
            "fixed size."
        )
    largest = max(sizes) + 1  # tokens verified, the root included
    if profile.buckets and largest > profile.buckets[-1]:
        raise ValueError(
            f"verify_sizes {sizes} verify up to {largest} tokens with the root, but the profile's static-cache path "
            f"verifies at most {profile.buckets[-1]} (its largest bucket of {profile.buckets}): the replay, as "
            f"generate, would verify fewer candidates than the agent picks. Pass sizes <= {profile.buckets[-1] - 1}, "
            f"or a profile with buckets that hold {largest} (`hf-adaptive-spec profile --static --buckets ...`)."
        )
    return sizes


def _max_context_length(replay: ReplayEnvironment) -> int:
    """The longest context of the recording, past its last cycle: over every prompt, not only the ones episodes are
    drawn from, since ``reset(options={"prompt": p})`` replays any recorded prompt and its observations must lie in
    ``observation_space`` too."""
    recorded = replay.recording.prompts
    return max(recorded[p][-1].context_length + 1 for p in replay.prompts_with_cycles(range(len(recorded))))


def _check_prompts(replay: ReplayEnvironment, prompts: Sequence[int] | None) -> list[int]:
    recording = replay.recording
    chosen = list(range(len(recording.prompts))) if prompts is None else list(prompts)
    outside = [p for p in chosen if not 0 <= p < len(recording.prompts)]
    if outside:  # a negative index would draw another prompt's episodes under this one's name
        raise ValueError(f"prompts {outside} are outside the recording's {len(recording.prompts)} prompts: give "
                         f"indices 0 to {len(recording.prompts) - 1}.")
    usable = replay.prompts_with_cycles(chosen)
    if not usable:
        raise ValueError(
            "The chosen recorded prompts have no positions: record longer generations or pick other prompts."
        )
    return usable


class DraftStepEnv(gym.Env):
    """One episode = one draft/verify cycle at a random recorded position (LTD's depth and size decisions).

    After each draft level the agent answers 1 (draft another level) or 0 (stop). The engine asks
    nothing after the deepest allowed level, so a cycle has 0 to ``depth - 1`` depth steps; with
    ``verify_sizes`` a last step verifies ``verify_sizes[action]`` candidates (root excluded).
    Rewards are 0 until the final step, which gets ``reward([cycle])``; its ``info["cycle"]`` is
    the :class:`ReplayedCycle` (``policy_time`` 0: the agent acts outside the engine). Positions
    where the engine asks nothing are skipped. ``reset(options={"prompt": p, "position": t})``
    replays a chosen cycle, of any recorded prompt (other keys are refused).

    Args:
        recording / profile: as for :class:`ReplayEnvironment`.
        config: the cycle's tree; default the recording's. Its ``depth`` caps drafting.
        verify_sizes: candidate counts for the verify-size step; None verifies ``config.total_tokens - 1``.
        observe: an :class:`Observer` of ``DraftStepInfo`` / ``VerifySizeInfo``; default
            :class:`ScoreObservation` with ``top_k**2`` scores.
        reward: maps ``[cycle]`` to the final reward; default :func:`tokens_per_second`.
        prompts: recorded prompts to draw episodes from; default all (``observation_space`` bounds
            every recorded prompt's observations: ``reset`` may name any).

    The action space is ``Discrete(max(2, len(verify_sizes)))``; at a depth step every action but
    0 continues. :meth:`action_masks` gives the meaningful actions (for maskable PPO). At the
    verify step it leaves out the sizes above the smallest that verifies the whole drafted tree:
    ``step`` still takes them (gymnasium's contract: every action of the space is valid), and they
    verify the whole tree, as that smallest size does (``info["cycle"].verified_tokens``).
    """

    metadata: ClassVar[dict[str, list[str]]] = {"render_modes": []}

    def __init__(
        self,
        recording: ReplayRecording,
        profile: HardwareProfile,
        config: TreeConfig | None = None,
        verify_sizes: Sequence[int] | None = None,
        observe: Observer | None = None,
        reward: Reward = tokens_per_second,
        prompts: Sequence[int] | None = None,
    ):
        self.replay = ReplayEnvironment(recording, profile)
        self.config = config or recording.tree_config
        self.replay.check_config(self.config)
        if self.config.depth < 1:
            raise ValueError(f"config {self.config} drafts nothing (depth 0: a plain step), so the agent decides "
                             "nothing: pass a config with depth >= 1.")
        self.verify_sizes = _checked_verify_sizes(verify_sizes, self.config, profile)
        if self.config.depth < 2 and self.verify_sizes is None:
            raise ValueError(
                "With depth 1 and no verify_sizes the agent decides nothing: raise depth or pass verify_sizes."
            )
        chosen = _check_prompts(self.replay, prompts)
        self.positions = [(p, t) for p in chosen for t in range(len(recording.prompts[p]))]
        self.observe = observe or ScoreObservation(self.config.top_k**2, self.config.depth,
                                                   _max_context_length(self.replay))
        self.reward = reward
        self.observation_space = self.observe.observation_space
        self.action_space = spaces.Discrete(max(2, len(self.verify_sizes or ())))
        self._cycle: SteppedCycle | None = None
        self._question: Question | None = None
        self._where: dict[str, int] = {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._stop_cycle()
        _check_option_keys("DraftStepEnv", options, ("prompt", "position"))
        if options and "position" in options and "prompt" not in options:
            raise ValueError(f"reset(options={options!r}) names a position without its prompt: pass "
                             "options={'prompt': p, 'position': t} (a position alone would be ignored).")
        if options and "prompt" in options:
            where = (_int_option("DraftStepEnv", options, "prompt"), _int_option("DraftStepEnv", options, "position"))
            self.replay.check_position(*where)
            if not self._start(*where):
                raise ValueError(f"The engine asks nothing at prompt {where[0]} position {where[1]} (too close to "
                                 "the end of the generation): pick an earlier position.")
        else:
            for _ in range(100):
                if self._start(*self.positions[int(self.np_random.integers(len(self.positions)))]):
                    break
            else:
                raise RuntimeError(
                    "100 random positions in a row asked nothing: the recording's generations are too short."
                )
        return self.observe(self._question), self._info()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._question is None:
            raise RuntimeError(NO_EPISODE)
        action = _checked_action(self.action_space, action)
        if isinstance(self._question, DraftStepInfo):
            answer: bool | int = action != 0
        else:
            answer = self.verify_sizes[action]
        last_observation = self.observe(self._question)
        try:
            result = self._cycle.next(answer)
        except Exception:
            self._stop_cycle()
            raise
        if isinstance(result, ReplayedCycle):
            self._question, self._cycle = None, None
            cycle = replace(result, policy_time=0.0)
            return last_observation, float(self.reward([cycle])), True, False, {**self._info(), "cycle": cycle}
        self._question = result
        return self.observe(result), 0.0, False, False, self._info()

    def action_masks(self) -> np.ndarray:
        """``[n]`` bool: at a depth step only 0 (stop) and 1 (continue); at the verify step every size up to the
        smallest that verifies the whole drafted tree (a larger one verifies as many: fewer than it picked)."""
        mask = np.ones(self.action_space.n, dtype=bool)
        if isinstance(self._question, DraftStepInfo):
            mask[2:] = False
        elif self._question is not None and self.verify_sizes is not None:
            candidates = self._question.scores.numel()
            covering = min((size for size in self.verify_sizes if size >= candidates), default=None)
            mask[:] = [covering is None or size <= covering for size in self.verify_sizes]
        return mask

    def close(self) -> None:
        self._stop_cycle()

    def __del__(self) -> None:
        self._stop_cycle()

    def _start(self, prompt: int, position: int) -> bool:
        """Start the cycle at ``(prompt, position)``; False when it finished without asking anything."""
        self._cycle = SteppedCycle(self.replay, prompt, position, self.config, self.verify_sizes is not None)
        self._where = {"prompt": prompt, "position": position}
        try:
            first = self._cycle.next()
        except Exception:
            self._stop_cycle()
            raise
        if isinstance(first, ReplayedCycle):
            self._cycle = None
            return False
        self._question = first
        return True

    def _stop_cycle(self) -> None:
        cycle = getattr(self, "_cycle", None)
        if cycle is not None:
            cycle.close()
        self._cycle, self._question = None, None

    def _info(self) -> dict:
        phase = "depth" if isinstance(self._question, DraftStepInfo) else "verify" if self._question else "done"
        return {**self._where, "phase": phase}


class TreeConfigEnv(gym.Env):
    """One episode = one recorded generation; one step = the tree of its next ``cycles_per_action`` cycles (Re-SpS).

    The observation is taken at the next cycle start: by default the target features the
    recording kept (:class:`FeatureObservation`; zeros past the end) and the context length.
    The reward is ``reward(cycles)`` over the cycles the step drafted, by default
    :func:`tokens_per_second`; the episode terminates when the generation is complete.
    ``reset(options={"prompt": p})`` replays a chosen generation, of any recorded prompt (other keys
    are refused); ``step`` before the first ``reset`` is refused.

    Args:
        recording / profile: as for :class:`ReplayEnvironment`.
        configs: ``configs[action]`` is the tree of the next cycles; each must fit the recording
            (same ``top_k``, no deeper, no larger).
        cycles_per_action: N, the cycles one action decides (Re-SpS trains with 10).
        observe: an :class:`Observer` of :class:`CycleState`; default :class:`FeatureObservation`.
        reward: maps the step's cycles to its reward.
        prompts: recorded prompts to draw episodes from; default all (``observation_space`` bounds
            every recorded prompt's observations: ``reset`` may name any).
    """

    metadata: ClassVar[dict[str, list[str]]] = {"render_modes": []}

    def __init__(
        self,
        recording: ReplayRecording,
        profile: HardwareProfile,
        configs: Sequence[TreeConfig],
        cycles_per_action: int = 10,
        observe: Observer | None = None,
        reward: Reward = tokens_per_second,
        prompts: Sequence[int] | None = None,
    ):
        if not configs:
            raise ValueError("TreeConfigEnv needs at least one TreeConfig: pass the tree of each action in configs.")
        self.cycles_per_action = int(check_number("TreeConfigEnv", "cycles_per_action", cycles_per_action, at_least=1,
                                                  integer=True, meaning="the cycles one action decides"))
        self.replay = ReplayEnvironment(recording, profile)
        for config in configs:
            self.replay.check_config(config)
        self.policies = [StaticTreePolicy(c.depth, c.top_k, c.total_tokens, c.sample_drafts) for c in configs]
        self.prompts = _check_prompts(self.replay, prompts)
        if observe is None:
            first = recording.prompts[self.prompts[0]][0]
            hidden = next(iter(first.features.values())).numel() if first.features else 0
            observe = FeatureObservation(recording.feature_layers, hidden, _max_context_length(self.replay))
        missing = sorted(set(getattr(observe, "feature_layers", ())) - set(recording.feature_layers))
        if missing:
            raise ValueError(
                f"The observer reads target hidden states {missing} that the recording does not keep (it has "
                f"{list(recording.feature_layers)}): they would read as zeros. Record with "
                "record_replay(..., feature_layers=...) holding them."
            )
        self.observe = observe
        self.reward = reward
        self.observation_space = observe.observation_space
        self.action_space = spaces.Discrete(len(configs))
        self._prompt: int | None = None  # None: no reset yet
        self._position = 0
        self._unread: int | None = None  # committed tokens the drafter has not read (None: the prompt, at its start)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        _check_option_keys("TreeConfigEnv", options, ("prompt",),
                           " ('position': an episode is a whole generation, replayed from its first cycle)"
                           if "position" in (options or ()) else "")
        if options and "prompt" in options:
            self._prompt = self._checked_prompt(_int_option("TreeConfigEnv", options, "prompt"))
        else:
            self._prompt = self.prompts[int(self.np_random.integers(len(self.prompts)))]
        self._position, self._unread = 0, None
        return self._observation(), self._info()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._prompt is None:
            raise RuntimeError(NO_EPISODE)
        trees = self.replay.recording.prompts[self._prompt]
        if self._position >= len(trees):
            raise RuntimeError("The generation is complete: call reset() to start another episode.")
        policy = self.policies[_checked_action(self.action_space, action)]
        cycles: list[ReplayedCycle] = []
        while len(cycles) < self.cycles_per_action and self._position < len(trees):
            cycles.append(self.replay.replay_cycle(self._prompt, self._position, policy, self._unread))
            self._position += cycles[-1].accepted_length + 1
            self._unread = cycles[-1].unread_after()
        info = {**self._info(), "accepted_lengths": [cycle.accepted_length for cycle in cycles]}
        return self._observation(), float(self.reward(cycles)), self._position >= len(trees), False, info

    def _checked_prompt(self, prompt: int) -> int:
        """``prompt``, refused unless it names a recorded generation with a cycle (a negative index would replay
        another prompt under this one's name)."""
        recorded = self.replay.recording.prompts
        if not 0 <= prompt < len(recorded) or not recorded[prompt]:
            usable = [p for p, trees in enumerate(recorded) if trees]
            raise ValueError(f"prompt {prompt} is not a recorded generation with a cycle: give one of the "
                             f"{len(usable)} prompts {usable[:8]}{'...' if len(usable) > 8 else ''}.")
        return prompt

    def _observation(self) -> np.ndarray:
        trees = self.replay.recording.prompts[self._prompt]
        if self._position < len(trees):
            return self.observe(trees[self._position].cycle_state())
        return self.observe(CycleState(trees[-1].context_length + 1))

    def _info(self) -> dict:
        return {"prompt": self._prompt, "position": self._position}
