"""``LTDPolicy``: LTD's depth and verification-size policies (Learning to Draft, ICLR 2026)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ...core.draws import multinomial_on_generator_device
from ...core.values import check_flag, check_number, int_list
from ..base import (
    CycleState,
    DraftPolicy,
    DraftStepInfo,
    TreeConfig,
    TreeSetting,
    VerifySizeInfo,
    check_top_k_tree,
    policy_tree,
)
from ..distributions import masked_categorical
from ..networks import HostDecisions, HostTanhMLP, hidden_widths, tanh_mlp
from ..serialization import PolicyHubMixin, trained_on_setting, tree_settings
from .features import (
    depth_observation,
    depth_observation_size,
    size_action_mask,
    size_observation,
    size_observation_size,
)

STOP, CONTINUE = 0, 1
HEADS = ("depth", "size")


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs (SB3 ``MlpPolicy`` with ``net_arch=dict(pi=…, vf=…)``)."""

    def __init__(self, observation_size: int, num_actions: int, actor: Sequence[int], critic: Sequence[int]):
        super().__init__()
        self.actor = tanh_mlp(observation_size, actor, num_actions, out_gain=0.01)
        self.critic = tanh_mlp(observation_size, critic, 1, out_gain=1.0)

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``[N, obs]`` -> ``(logits [N, actions], values [N])``."""
        return self.actor(observations), self.critic(observations)[:, 0]


@dataclass
class Decision:
    """One sampled decision, logged in training mode for PPO.

    Args:
        head: ``"depth"`` or ``"size"``.
        observation: ``[obs]`` what the head saw.
        action: the sampled action index (depth: 0 stop, 1 continue; size: index into ``size_choices``).
        log_prob: log-probability of ``action`` under the sampling policy.
        value: the critic's value of ``observation``.
        action_mask: ``[actions]`` allowed actions (size head), or None.
    """

    head: str
    observation: torch.Tensor
    action: int
    log_prob: float
    value: float
    action_mask: torch.Tensor | None = None


class LTDPolicy(HostDecisions, DraftPolicy, nn.Module, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.ltd"):
    """Two small PPO policies deciding, every cycle, when to stop drafting and how much to verify.

    The *depth* head is asked after every draft step (continue or stop) and sees the depth, the
    context length and the path probabilities of the step's new candidates. The *size* head is
    asked once drafting stopped and picks how many candidates to verify from ``size_choices``,
    seeing the drafted depth, the context length and every candidate's path probability. Both
    are SB3-style actor-critic MLPs with Tanh; observations are built by
    :mod:`~hf_adaptive_spec.policies.ltd.features` from the hook arguments, so replay training and
    ``generate`` see the same numbers.

    In ``eval()`` mode (the default, and after ``from_pretrained``) each head takes its argmax
    action, whatever mode a head was set to alone. In ``train()`` mode a head also in ``train()``
    mode samples (with ``generator``) and appends a :class:`Decision` to ``decisions``; the trainer
    sets the head it does not train back to ``eval()``.

    Args:
        depth: depth cap of the draft tree.
        top_k: children per expanded node and beams per level (EAGLE-2).
        total_tokens: largest verification, root included (``max(size_choices) + 1`` at most useful).
        size_choices: verification sizes the size head chooses from (candidates, root excluded),
            strictly increasing, each ``<= total_tokens - 1``; default ``1 … total_tokens - 1``.
        context_scale: the context length is divided by this in observations (LTD: 1000).
        lookup_feature: both heads also see the length of the prompt-lookup chain the cycle will
            graft (``DraftStepInfo.lookup_length``). Train it on a replay with the branch and use
            it with ``generate(..., prompt_lookup_num_tokens=N)``: without the branch it always sees 0.
        lookup_first: where the prompt-lookup branch matched, the cycle verifies the chain alone and drafts
            nothing (as :class:`~hf_adaptive_spec.policies.LookupFirstPolicy`), so the heads decide only the cycles
            lookup cannot fill. Train it on a replay with the branch, as the policy is used.
        depth_actor / depth_critic / size_actor / size_critic: hidden widths (paper: ``[1024]``
            for the depth actor, ``[1024, 256]`` for the others).
        trained_on / trained_for_drafter / trained_with_lookup_tokens / trained_with_lookup_ngram_size: what it was
            trained on (cost curve, drafter, prompt-lookup branch), as ``config.json`` holds them; the engine compares
            them with each call's (:class:`~hf_adaptive_spec.policies.DraftPolicy`,
            :meth:`~hf_adaptive_spec.policies.serialization.PolicyHubMixin.mark_trained_on`).

    Example:
        >>> policy = LTDPolicy.from_pretrained("org/ltd-smollm2")
        >>> out = model.generate(**inputs, assistant_model=drafter, assistant_policy=policy)
    """

    depth = TreeSetting("tree")
    top_k = TreeSetting("tree")
    total_tokens = TreeSetting("tree")

    def __init__(
        self,
        depth: int = 6,
        top_k: int = 3,
        total_tokens: int = 16,
        size_choices: list[int] | None = None,
        context_scale: float = 1000.0,
        lookup_feature: bool = False,
        lookup_first: bool = False,
        depth_actor: Sequence[int] = (1024,),
        depth_critic: Sequence[int] = (1024, 256),
        size_actor: Sequence[int] = (1024, 256),
        size_critic: Sequence[int] = (1024, 256),
        trained_on: dict[str, str] | None = None,
        trained_for_drafter: dict[str, str] | None = None,
        trained_with_lookup_tokens: int | None = None,
        trained_with_lookup_ngram_size: int | None = None,
    ):
        nn.Module.__init__(self)
        self._read_training_record(
            trained_on, trained_for_drafter, trained_with_lookup_tokens, trained_with_lookup_ngram_size
        )
        self.tree = policy_tree(type(self).__name__, depth=depth, top_k=top_k, total_tokens=total_tokens)
        self.register_buffer("choices", torch.empty(0, dtype=torch.long), persistent=False)
        self.size_choices = list(range(1, total_tokens)) if size_choices is None else size_choices
        self.context_scale = context_scale
        self.lookup_feature, self.lookup_first = lookup_feature, lookup_first
        self._check_shape_settings()
        self.context_scale = float(context_scale)
        widths = {name: hidden_widths("LTDPolicy", name, value) for name, value in (
            ("depth_actor", depth_actor), ("depth_critic", depth_critic), ("size_actor", size_actor),
            ("size_critic", size_critic))}
        self.depth_head = ActorCritic(depth_observation_size(self.tree, lookup_feature), 2, widths["depth_actor"],
                                      widths["depth_critic"])
        size_observations = size_observation_size(self.tree, lookup_feature)
        self.size_head = ActorCritic(size_observations, len(self.size_choices), widths["size_actor"],
                                     widths["size_critic"])
        self.generator: torch.Generator | None = None
        self.decisions: list[Decision] = []
        self.eval()

    @property
    def size_choices(self) -> list[int]:
        """The verification sizes the size head chooses from (a copy: set the attribute to change them)."""
        return list(self._size_choices)

    @size_choices.setter
    def size_choices(self, choices: Iterable[int]) -> None:
        """Check the choices and make the tensors the size decisions are masked with from them: ``choices`` on the
        module's device (training), a host copy (an eval-mode decision runs on the host, wherever the module is)."""
        choices = int_list("LTDPolicy", "size_choices", choices,
                           "verification sizes such as [1, 2, 4, 8] (candidates, the root excluded)")
        _check_size_choices(choices, self.tree.total_tokens)
        head = self._modules.get("size_head")
        outputs = None if head is None else head.actor[-1].out_features
        if outputs is not None and len(choices) != outputs:
            raise ValueError(
                f"LTDPolicy: the size head has {outputs} outputs, one per choice, got {len(choices)} size_choices "
                f"{choices}: keep {outputs} choices, or build and train a new policy."
            )
        self._size_choices = choices
        self.choices = torch.tensor(choices, device=self.choices.device)
        self._host_choices = torch.tensor(choices, device="cpu")

    def _check_shape_settings(self) -> None:
        """The settings the heads' shapes follow from: a top-k tree with a decision, the scale, the flags."""
        check_top_k_tree("LTDPolicy", "tree", self.tree)
        if self.tree.depth < 1:
            raise ValueError(
                f"LTDPolicy: at depth {self.tree.depth} nothing is drafted and no head is asked; pass depth >= 1."
            )
        # infinity would read every context length as 0
        check_number("LTDPolicy", "context_scale", self.context_scale, above=0, below=math.inf,
                     meaning="context lengths are divided by it in observations; LTD: 1000")
        check_flag("LTDPolicy", "lookup_feature", self.lookup_feature)
        check_flag("LTDPolicy", "lookup_first", self.lookup_first)
        if self.lookup_feature and self.lookup_first:
            raise ValueError(
                "LTDPolicy: lookup_first=True leaves the heads only the cycles where the prompt-lookup branch did not "
                "match, so lookup_feature would always read 0. Drop lookup_feature (or lookup_first)."
            )

    def check_settings(self) -> None:
        """The settings as set now (:meth:`_check_shape_settings`), with a tree the heads still read and
        ``size_choices`` it verifies."""
        super().check_settings()
        self._check_shape_settings()
        _check_size_choices(self._size_choices, self.tree.total_tokens)
        reads = (depth_observation_size(self.tree, self.lookup_feature), size_observation_size(self.tree,
                 self.lookup_feature))
        built = (self.depth_head.actor[0].in_features, self.size_head.actor[0].in_features)
        if reads != built:
            raise ValueError(
                f"LTDPolicy's heads read observations of {built[0]} and {built[1]} numbers, but its tree "
                f"{self.tree} (lookup_feature={self.lookup_feature}) makes {reads[0]} and {reads[1]}: keep the "
                "depth, top_k and lookup_feature it was built with, or build and train a new policy."
            )

    def _current_settings(self) -> dict:
        settings = {**trained_on_setting(self), **tree_settings(self.tree), "context_scale": self.context_scale}
        return {**settings, "lookup_first": self.lookup_first, "size_choices": list(self.size_choices)}

    def forward(self, observations: torch.Tensor, head: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``head``'s ``(logits [N, actions], values [N])`` for ``observations`` ``[N, obs]`` (PPO's loss)."""
        return self._head(head)(observations)

    # -- the engine's hooks -------------------------------------------------------------------
    def tree_config(self, state: CycleState) -> TreeConfig:
        return self.tree.lookup_first(state) if self.lookup_first else self.tree

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        return self._decide("depth", self.depth_observation(step)) == CONTINUE

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        mask = size_action_mask(info, self.tree, self.choices if self._samples(self.size_head) else self._host_choices)
        return self._size_choices[self._decide("size", self.size_observation(info), mask)]

    # -- observations (public so tests and tools can check what the heads see) -----------------
    def depth_observation(self, step: DraftStepInfo) -> torch.Tensor:
        """``[2 + top_k²]`` (+1 with ``lookup_feature``): see :func:`.features.depth_observation`."""
        return depth_observation(step, self.tree, self.context_scale, self.lookup_feature)

    def size_observation(self, info: VerifySizeInfo) -> torch.Tensor:
        """``[2 + top_k + (depth - 1) · top_k²]`` (+1 with ``lookup_feature``): see
        :func:`.features.size_observation`."""
        return size_observation(info, self.tree, self.context_scale, self.lookup_feature)

    def _head(self, name: str) -> ActorCritic:
        if name not in HEADS:
            raise ValueError(f"LTDPolicy has heads {HEADS}, not {name!r}.")
        return self.depth_head if name == "depth" else self.size_head

    def _copy_to_host(self) -> dict[str, HostTanhMLP]:
        """The actors copied to the host (:class:`~hf_adaptive_spec.policies.networks.HostTanhMLP`): an eval-mode
        decision inside ``generate`` is a few matrix-vector products in numpy, not a dozen tiny torch ops."""
        return {name: HostTanhMLP(self._head(name).actor) for name in HEADS}

    def _samples(self, head: ActorCritic) -> bool:
        """Whether ``head`` samples: only in a policy in ``train()`` mode (``policy.training`` says how it decides, a
        head left in ``train()`` mode under an ``eval()`` policy takes its argmax)."""
        return self.training and head.training

    @torch.no_grad()
    def _decide(self, name: str, observation: torch.Tensor, mask: torch.Tensor | None = None) -> int:
        head = self._head(name)
        if not self._samples(head):  # the argmax action, computed on the host (float32, whatever the weights' dtype)
            logits = self.host()[name](observation.numpy(force=True))
            return int(logits.argmax() if mask is None else np.where(mask.numpy(force=True), logits, -np.inf).argmax())
        observation = observation.to(self.choices.device, next(head.parameters()).dtype)  # a bfloat16 policy too
        logits, value = head(observation[None])
        distribution = masked_categorical(logits, None if mask is None else mask[None])
        action = multinomial_on_generator_device(distribution.probs, self.generator)
        self.decisions.append(
            Decision(name, observation, int(action), float(distribution.log_prob(action)), float(value), mask)
        )
        return int(action)

    def __repr__(self) -> str:
        t = self.tree
        shape = f"depth={t.depth}, top_k={t.top_k}, total_tokens={t.total_tokens}"
        lookup = ", lookup_feature=True" if self.lookup_feature else ""
        lookup += ", lookup_first=True" if self.lookup_first else ""
        return f"LTDPolicy({shape}, size_choices={self.size_choices}{lookup})"


def _check_size_choices(choices: list[int], total_tokens: int) -> None:
    valid = all(isinstance(c, int) and not isinstance(c, bool) for c in choices)
    if not choices or not valid or choices != sorted(set(choices)) or choices[0] < 0 or choices[-1] > total_tokens - 1:
        raise ValueError(
            f"LTDPolicy: size_choices must be strictly increasing ints in [0, total_tokens - 1 = {total_tokens - 1}], "
            f"got {choices!r}. Raise total_tokens or drop the larger choices."
        )
