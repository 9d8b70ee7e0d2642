"""``ReSpSPolicy``: a PPO actor-critic choosing the draft tree's (total_tokens, depth, top_k) every N cycles.

Re-SpS (*Speculative Sampling with Reinforcement Learning*, AAAI 2026, github.com/wmd3i/ReSpS):

- **state**: the target's three EAGLE-3 feature layers (``hidden_states`` 2, L//2, L-3) at the
  last committed position, *concatenated* (the reference code averages them and truncates to
  4096 dims), standardised with statistics fitted once on recordings and saved with the weights;
- **action**: one entry of a discrete grid of tree shapes, held for ``N`` cycles (action
  persistence: 10 while training, 30 at inference);
- **reward**: tokens per second over those ``N`` cycles, from the engine's measured draft,
  verify and policy times (the reference code leaves drafting out).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributions import Categorical
from transformers import PretrainedConfig

from ...core.features import default_aux_layer_ids
from ...core.tree import full_tree_size
from ...core.values import check_flag, check_number, int_list, plain_ints
from ..base import CycleFeedback, CycleState, DraftPolicy, TreeConfig, check_top_k_tree
from ..networks import hidden_widths, tanh_mlp
from ..serialization import PolicyHubMixin, trained_on_setting

Action = tuple[int, int, int]  # (total_tokens, depth, top_k)


def action_grid(
    total_tokens: Iterable[int], depths: Iterable[int], top_ks: Iterable[int], paper_filter: bool = True
) -> tuple[Action, ...]:
    """Every ``(total_tokens, depth, top_k)`` with ``total_tokens <= full_tree_size(depth, top_k)`` and,
    with ``paper_filter``, ``total_tokens <= top_k ** (depth - 1)`` (the paper's filter, which removes
    chains and depth-1 trees), in the paper's order (top_k fastest)."""
    return tuple(
        (tt, d, k)
        for tt, d, k in itertools.product(total_tokens, depths, top_ks)
        if (not paper_filter or tt <= k ** (d - 1)) and tt <= full_tree_size(d, k)
    )


#: Named action grids. ``"paper"``: Re-SpS's 6 x 6 x 5 grid (177 actions after the filter).
#: ``"cpu"`` (default): small trees, which win on a CPU (53 actions). The paper's filter removes
#: every ``top_k=1`` (chain) action, so the CPU grid starts at ``top_k=2``.
ACTION_GRIDS: dict[str, tuple[Action, ...]] = {
    "paper": action_grid((32, 48, 64, 80, 96, 128), range(3, 9), (8, 12, 16, 20, 32)),
    "cpu": action_grid((4, 6, 8, 12, 16), range(2, 7), (2, 3, 4)),
}


@dataclass
class ReSpSDecision:
    """One action held for an interval of cycles: a PPO transition, logged in training mode.

    Args:
        observation: the normalised state ``[obs_dim]`` at decision time.
        action: index into the policy's ``actions``.
        log_prob: log-probability of ``action`` when it was sampled.
        value: the critic's value of ``observation``.
        cycles / tokens / seconds: cycles run with the action, tokens they produced (accepted
            drafts + bonus token) and their draft + verify + policy time.
        done: the generation ended with this interval.
    """

    observation: torch.Tensor
    action: int
    log_prob: float
    value: float
    cycles: int = 0
    tokens: int = 0
    seconds: float = 0.0
    done: bool = False

    @property
    def reward(self) -> float:
        """Tokens per second over the interval (its real throughput: total tokens / total time)."""
        return self.tokens / max(self.seconds, 1e-12)


def _actions(actions: object) -> tuple[TreeConfig, ...]:
    """The grid's actions as trees; refused, naming the form, unless each is ``(total_tokens, depth, top_k)`` (or a
    :class:`TreeConfig`, as ``policy.actions`` holds them)."""
    entries = [] if isinstance(actions, (str, bytes)) or not isinstance(actions, Iterable) else list(actions)
    malformed = [a for a in entries  # a triple of any kind: a list, a tuple, a numpy row
                 if not isinstance(a, TreeConfig)
                 and (isinstance(a, (str, bytes)) or not isinstance(a, Iterable) or len(list(a)) != 3)]
    if malformed or isinstance(actions, (str, bytes)) or not isinstance(actions, Iterable):
        raise ValueError(f"ReSpSPolicy: actions must be a list of (total_tokens, depth, top_k) triples, got "
                         f"{malformed[:3] or actions!r}; ACTION_GRIDS and action_grid() give such grids.")
    return tuple(action if isinstance(action, TreeConfig) else _action(*action) for action in entries)


def _action(total_tokens: int, depth: int, top_k: int) -> TreeConfig:
    """One grid entry as a tree, its numbers checked as a tree's (a float is refused, not rounded down)."""
    total_tokens, depth, top_k = plain_ints((total_tokens, depth, top_k))
    return TreeConfig(total_tokens=total_tokens, depth=depth, top_k=top_k)


def _check_feature_layers(layers: object) -> tuple[int, ...]:
    """At least one hidden-state index, each an int >= 0 (``hidden_states`` numbering: 0 is the embeddings), as a
    tuple of ints."""
    layers = tuple(int_list("ReSpSPolicy", "feature_layers", layers,
                            "indices into the target's hidden_states such as [2, 15, 27]"))
    if not layers or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in layers):
        raise ValueError(
            f"ReSpSPolicy: feature_layers must be one or more ints >= 0 (indices into the target's hidden_states), "
            f"got {list(layers)!r}: leave them unset for EAGLE-3's (2, L//2, L-3), with num_target_layers >= 4."
        )
    return layers


def _hidden_widths_of(mlp: nn.Sequential) -> tuple[int, ...]:
    """The hidden layer widths a :func:`tanh_mlp` was built with (its ``hidden``)."""
    return tuple(layer.out_features for layer in mlp if isinstance(layer, nn.Linear))[:-1]


def _check_hidden_size(hidden_size: object) -> int:
    """The target's hidden size, refused unless an int >= 1 (a negative or fractional one failed inside torch)."""
    return int(check_number("ReSpSPolicy", "hidden_size", hidden_size, at_least=1, integer=True,
                            meaning="the target's hidden size: ReSpSPolicy.for_target(model.config) reads it"))


class ReSpSPolicy(DraftPolicy, nn.Module, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.resps"):
    """Re-SpS: every ``decision_interval`` cycles, pick a tree shape from the target's hidden states.

    Modes follow ``nn.Module``: a new or loaded policy is in ``eval()`` mode: it takes the argmax
    action (or samples at ``temperature`` > 0) and holds it ``decision_interval`` cycles. In
    ``train()`` mode it samples, holds ``training_interval`` cycles, and logs each decision with
    its reward in :attr:`decisions` (read them with :meth:`pop_decisions`).

    A new ``generate`` call (:meth:`begin_generation`, and a context length that does not continue the last cycle
    for callers that drive the hooks without it) or :meth:`end_episode` drops the held action, so every generation
    starts with a decision.
    The feature statistics start at mean 0 and std 1; :meth:`fit_normalizer` sets them before
    training (``ReSpSTrainer`` does) and they are saved with the weights. They stay float32 in a policy cast to
    bfloat16 or float16, which standardises in float32 and rounds only the result.

    Args:
        hidden_size: the target's hidden size.
        num_target_layers: the target's decoder layers ``L``, for the default feature layers (needed only
            without ``feature_layers``).
        feature_layers: target hidden states concatenated into the state (``hidden_states``
            numbering); default EAGLE-3's ``(2, L//2, L-3)``.
        actions: the grid of ``(total_tokens, depth, top_k)`` actions, e.g. ``ACTION_GRIDS["paper"]``;
            ``total_tokens`` counts the root, as :class:`TreeConfig` does.
        net_arch: hidden widths of the actor and of the critic MLP (the paper: [128, 128]).
        decision_interval: cycles an action is held at inference (the paper: 30).
        training_interval: cycles an action is held in training mode (the paper: 10).
        temperature: 0 takes the argmax at inference; > 0 samples ``softmax(logits / T)`` (the
            reference code samples at 1.5).
        observation_clip: standardised features are clipped to ``[-clip, clip]``.
        lookup_first: where the prompt-lookup branch matched, the cycle verifies the chain alone and drafts
            nothing (as :class:`~hf_adaptive_spec.policies.LookupFirstPolicy`); the held action shapes the other
            cycles. Train it on replays with the branch, as it is used.
        trained_on / trained_for_drafter / trained_with_lookup_tokens / trained_with_lookup_ngram_size: what it was
            trained on (cost curve, drafter, prompt-lookup branch), as ``config.json`` holds them; the engine compares
            them with each call's (:class:`~hf_adaptive_spec.policies.DraftPolicy`,
            :meth:`~hf_adaptive_spec.policies.serialization.PolicyHubMixin.mark_trained_on`).

    Example:
        >>> policy = ReSpSPolicy.for_target(model.config)   # then train it: trainers/resps.py
        >>> model.generate(**inputs, assistant_model=eagle3_drafter, assistant_policy=policy)
    """

    card_summary = (
        "Re-SpS: a PPO actor-critic that reads the target's hidden states, picks a tree shape (total tokens, depth, "
        "top-k) from a fixed grid, and holds it for `decision_interval` cycles (`training_interval` while training; "
        "both saved in its `config.json`)."
    )

    #: the feature statistics stay float32 through ``.to(torch.bfloat16)``: rounded to bfloat16 (a step of 0.5 near
    #: 100) a narrow feature's mean moves by several of its standard deviations, and the decisions change
    float32_keys = frozenset({"feature_mean", "feature_std"})

    def __init__(
        self,
        hidden_size: int,
        num_target_layers: int | None = None,
        feature_layers: Sequence[int] | None = None,
        actions: Sequence[Sequence[int]] = ACTION_GRIDS["cpu"],
        net_arch: Sequence[int] = (128, 128),
        decision_interval: int = 30,
        training_interval: int = 10,
        temperature: float = 0.0,
        observation_clip: float = 10.0,
        lookup_first: bool = False,
        trained_on: dict[str, str] | None = None,
        trained_for_drafter: dict[str, str] | None = None,
        trained_with_lookup_tokens: int | None = None,
        trained_with_lookup_ngram_size: int | None = None,
    ):
        super().__init__()
        self._read_training_record(
            trained_on, trained_for_drafter, trained_with_lookup_tokens, trained_with_lookup_ngram_size
        )
        self.actions = actions
        if feature_layers is None and num_target_layers is None:
            raise ValueError(
                "ReSpSPolicy reads target hidden states: give feature_layers, or num_target_layers for EAGLE-3's "
                "(2, L//2, L-3); ReSpSPolicy.for_target(model.config) takes them from the target."
            )
        if num_target_layers is not None:  # True was read as 1 layer
            check_number("ReSpSPolicy", "num_target_layers", num_target_layers, at_least=1, integer=True,
                         meaning="the target's decoder layers, for EAGLE-3's default feature_layers (2, L//2, L-3)")
        layers = default_aux_layer_ids(num_target_layers) if feature_layers is None else feature_layers
        self.feature_layers = _check_feature_layers(layers)
        self.hidden_size = _check_hidden_size(hidden_size)
        self.decision_interval = decision_interval
        self.training_interval = training_interval
        self.temperature = temperature
        self.observation_clip = observation_clip
        self.lookup_first = lookup_first
        self.net_arch = hidden_widths("ReSpSPolicy", "net_arch", net_arch)
        obs_dim = self.hidden_size * len(self.feature_layers)
        self.actor = tanh_mlp(obs_dim, self.net_arch, len(self.actions), out_gain=0.01)
        self.critic = tanh_mlp(obs_dim, self.net_arch, 1, out_gain=1.0)
        self.register_buffer("feature_mean", torch.zeros(obs_dim, dtype=torch.float32))
        self.register_buffer("feature_std", torch.ones(obs_dim, dtype=torch.float32))
        self.decisions: list[ReSpSDecision] = []
        self.decided = False  # whether the last tree_config call took a new decision
        self._open: ReSpSDecision | None = None
        self._action = 0
        self._cycles_left = 0
        self._next_context: int | None = None
        self.check_settings()
        self.eval()

    @property
    def actions(self) -> tuple[TreeConfig, ...]:
        """The grid of tree shapes the actor picks from, one per output (set ``(total_tokens, depth, top_k)``
        triples or trees: the same count, or the actor's outputs would index past the grid)."""
        return self._grid

    @actions.setter
    def actions(self, actions: Iterable) -> None:
        self._grid = _actions(actions)

    def check_settings(self) -> None:
        """Refuse settings that would run without saying so: a fractional interval holds an action a rounded-up
        number of cycles, a negative or NaN temperature is argmax, and a clip of 0 or below makes every observation
        the same constant (``clamp(-c, c)``), so one action whatever the state. And settings the networks no longer
        fit, set since construction: ``actions`` of another count than the actor's outputs (its decisions index
        past the grid), ``feature_layers`` and ``hidden_size`` making other than the features they read, and a
        ``net_arch`` they were not built with (``save_pretrained`` wrote folders that could not be loaded)."""
        super().check_settings()
        if not self.actions:
            raise ValueError("ReSpSPolicy needs at least one action; pick a grid from ACTION_GRIDS or action_grid().")
        for index, action in enumerate(self.actions):
            check_top_k_tree("ReSpSPolicy", f"actions[{index}]", action)
        if len(self.actions) != self.actor[-1].out_features:
            raise ValueError(
                f"ReSpSPolicy's actor has {self.actor[-1].out_features} outputs, one per action, but actions holds "
                f"{len(self.actions)}: keep {self.actor[-1].out_features} actions, or build and train a new policy."
            )
        layers, hidden_size = _check_feature_layers(self.feature_layers), _check_hidden_size(self.hidden_size)
        reads = self.feature_mean.numel()
        if hidden_size * len(layers) != reads:
            raise ValueError(
                f"ReSpSPolicy's networks read {reads} features, but feature_layers {list(layers)} of hidden_size "
                f"{hidden_size} make {hidden_size * len(layers)}: keep the feature layers and hidden size it was built "
                "with, or build and train a new policy (ReSpSPolicy.for_target(target.config))."
            )
        widths = hidden_widths("ReSpSPolicy", "net_arch", self.net_arch)
        built = _hidden_widths_of(self.actor)
        if widths != built:
            raise ValueError(
                f"ReSpSPolicy's actor and critic have hidden widths {list(built)}, but net_arch is {list(widths)}: "
                f"keep net_arch={list(built)} (it only describes the networks), or build and train a new policy."
            )
        for name in ("decision_interval", "training_interval"):
            check_number("ReSpSPolicy", name, getattr(self, name), at_least=1, integer=True, meaning="cycles")
        check_number("ReSpSPolicy", "temperature", self.temperature, at_least=0,
                     meaning="0: the argmax action; > 0: sample")
        check_number("ReSpSPolicy", "observation_clip", self.observation_clip, above=0,
                     meaning="standardised features are clipped to [-clip, clip]; math.inf for none")
        check_flag("ReSpSPolicy", "lookup_first", self.lookup_first)

    @classmethod
    def for_target(cls, config: PretrainedConfig, **kwargs) -> ReSpSPolicy:
        """A policy for a target with this transformers config (its hidden size and layer count)."""
        return cls(hidden_size=config.hidden_size, num_target_layers=config.num_hidden_layers, **kwargs)

    def _current_settings(self) -> dict:
        """What the policy holds, the layers, actions and widths as plain lists (whatever sequence built them)."""
        actions = [[action.total_tokens, action.depth, action.top_k] for action in self.actions]
        return {
            "hidden_size": self.hidden_size, "feature_layers": list(self.feature_layers), "actions": actions,
            "net_arch": list(self.net_arch),
            **trained_on_setting(self), "decision_interval": self.decision_interval,
            "training_interval": self.training_interval, "temperature": self.temperature,
            "observation_clip": self.observation_clip, "lookup_first": self.lookup_first,
        }

    def _apply(self, fn, recurse=True):
        """``nn.Module._apply`` (``.to``, ``.half()``, ``.cuda()`` ...), the feature statistics kept float32 whatever
        the cast (a half-precision one would round them; a float64 one gains nothing): moved to the device the others
        went to."""
        statistics = {name: self._buffers[name] for name in self.float32_keys}
        super()._apply(fn, recurse)
        for name, before in statistics.items():
            after = self._buffers[name]
            if after.dtype != torch.float32:
                self._buffers[name] = before.to(device=after.device, dtype=torch.float32)
        return self

    def required_recordings(self) -> dict[int, TreeConfig]:
        """Per ``top_k`` of the grid, the smallest replay recording that holds all its actions."""
        shapes: dict[int, TreeConfig] = {}
        for action in self.actions:
            held = shapes.get(action.top_k, action)
            depth, total_tokens = max(held.depth, action.depth), max(held.total_tokens, action.total_tokens)
            shapes[action.top_k] = TreeConfig(depth=depth, top_k=action.top_k, total_tokens=total_tokens)
        return dict(sorted(shapes.items()))

    # -- state ------------------------------------------------------------------------------

    def raw_observation(self, state: CycleState) -> torch.Tensor:
        """The feature layers at the last committed position, concatenated: ``[obs_dim]`` float32."""
        missing = [i for i in self.feature_layers if i not in state.features]
        if missing:
            raise ValueError(
                f"ReSpSPolicy reads target hidden states {list(self.feature_layers)} but the cycle state lacks "
                f"{missing} (it has {sorted(state.features)}): it was built for a target of another depth, or the "
                "recording kept other layers. generate passes policy.feature_layers itself; for replay, record with "
                f"them (`hf-adaptive-spec record --feature-layers {','.join(map(str, self.feature_layers))}`, or "
                "record_replay(..., feature_layers=policy.feature_layers))."
            )
        raw = torch.cat([state.features[i].reshape(-1) for i in self.feature_layers]).to(self.feature_mean)
        if raw.numel() != self.feature_mean.numel():
            raise ValueError(
                f"The target's features have {raw.numel() // len(self.feature_layers)} dims per layer, but this policy "
                f"was built for {self.feature_mean.numel() // len(self.feature_layers)}: build it with "
                "ReSpSPolicy.for_target(target.config)."
            )
        return raw

    def observation(self, state: CycleState) -> torch.Tensor:
        """The policy's input ``[obs_dim]``: :meth:`raw_observation` standardised and clipped in float32, then in the
        networks' dtype (a bfloat16 policy rounds the standardised value, not the raw feature and its mean)."""
        standardised = (self.raw_observation(state) - self.feature_mean) / self.feature_std
        clipped = standardised.clamp(-self.observation_clip, self.observation_clip)
        return clipped.to(self.actor[0].weight.dtype)

    @torch.no_grad()
    def fit_normalizer(self, states: Iterable[CycleState]) -> None:
        """Set the feature mean and standard deviation (kept in the weights) from ``states``.

        Fit once, before training (the trainer does it on the recordings); training and
        inference then standardise identically. Standard deviations are floored at 1% of their mean.
        """
        total = squares = None
        count = 0
        for state in states:
            raw = self.raw_observation(state).double()
            total = raw if total is None else total + raw
            squares = raw**2 if squares is None else squares + raw**2
            count += 1
        if count < 2:
            raise ValueError(f"fit_normalizer needs at least 2 states, got {count}.")
        mean = total / count
        std = (squares / count - mean**2).clamp_min(0).sqrt()
        floor = max(float(std.mean()) * 1e-2, 1e-6)  # near-constant dims stay near 0 instead of amplifying noise
        self.feature_mean.copy_(mean.float())
        self.feature_std.copy_(std.clamp_min(floor).float())

    # -- networks ---------------------------------------------------------------------------

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits [N, num_actions], values [N])`` for normalised ``observations [N, obs_dim]``."""
        return self.actor(observations), self.critic(observations).squeeze(-1)

    # -- engine hooks -----------------------------------------------------------------------

    def begin_generation(self) -> None:
        """A new generation (``generate``'s call, a replayed prompt) starts with a decision: end the last one's
        episode. The context length alone cannot tell: a prompt one token shorter than where the last generation's
        next cycle would have begun (a continuation of its output, or any prompt of that length) reads as its next
        cycle, and would hold its action, and in training extend its interval, into the new call."""
        self.end_episode()

    @torch.no_grad()
    def tree_config(self, state: CycleState) -> TreeConfig:
        if self._next_context is not None and state.context_length != self._next_context:
            self.end_episode()  # a new generation started without begin_generation (hooks driven directly)
        self.decided = self._cycles_left == 0
        if self.decided:
            self._decide(self.observation(state))
        tree = self.actions[self._action]
        return tree.lookup_first(state) if self.lookup_first else tree

    def observe(self, feedback: CycleFeedback) -> None:
        self._next_context = feedback.context_length + feedback.accepted_length + 1
        self._cycles_left = max(self._cycles_left - 1, 0)
        if self._open is None:
            return
        self._open.cycles += 1
        self._open.tokens += feedback.tokens_added  # none past the generation's end
        self._open.seconds += feedback.draft_time + feedback.verify_time + feedback.policy_time
        if self._cycles_left == 0:
            self._close(done=False)

    def end_episode(self) -> None:
        """End the generation: drop the held action; in training mode its decision is the episode's last."""
        if self._open is not None and self._open.cycles:
            self._close(done=True)
        elif self.decisions:
            self.decisions[-1].done = True
        self._open, self._cycles_left, self._next_context = None, 0, None

    def pop_decisions(self) -> list[ReSpSDecision]:
        """The completed decisions logged in training mode, oldest first; clears the log."""
        decisions, self.decisions = self.decisions, []
        return decisions

    def _decide(self, observation: torch.Tensor) -> None:
        logits = self.actor(observation)
        if self.training:
            distribution = Categorical(logits=logits)
            action = distribution.sample()
            value = self.critic(observation)
            self._open = ReSpSDecision(observation, int(action), float(distribution.log_prob(action)), float(value))
            self._cycles_left = self.training_interval
        else:
            if self.temperature > 0:  # in float64, from the best logit: a tiny temperature gives 0 and -inf, no NaN
                scaled = (logits.double() - logits.max().double()) / self.temperature
                action = torch.multinomial(torch.softmax(scaled, -1), 1)[0]
            else:
                action = logits.argmax()
            self._cycles_left = self.decision_interval
        self._action = int(action)

    def _close(self, done: bool) -> None:
        self._open.done = done
        self.decisions.append(self._open)
        self._open = None
