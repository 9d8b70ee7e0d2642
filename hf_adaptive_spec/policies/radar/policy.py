"""RADAR's draft policy: an LSTM over each draft step's beam scores decides continue or stop."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn

from ...core.values import check_flag, check_number
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
from ..networks import HostDecisions, host_array
from ..serialization import PolicyHubMixin, trained_on_setting, tree_settings

#: action indices of the policy's logits (RADAR's order: ``probs[..., 0]`` is P(stop)). ``SKIP``
#: (only with ``allow_skip``, only at the first decision): stop and verify nothing, a plain step.
STOP, CONTINUE, SKIP = 0, 1, 2


def beam_scores(step_scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """RADAR's state for one draft step: the ``top_k`` best cumulative log-probs, best first, ``[top_k]``
    (float32, on the host).

    ``step_scores`` ``[n]`` are the scores of every candidate the step produced
    (``DraftStepInfo.step_scores``); the engine expands the ``top_k`` best of them next, so these
    are the scores of the next frontier (EAGLE's beam). Missing entries (``n < top_k``) are ``-inf``.
    """
    return torch.from_numpy(_host_beam_scores(step_scores, top_k))


def _host_beam_scores(step_scores: torch.Tensor, top_k: int) -> np.ndarray:
    """:func:`beam_scores` as a numpy array: the engine asks with a handful of scores, and a sort in numpy
    costs less than torch's dispatch."""
    best = -np.sort(-step_scores.detach().float().cpu().numpy())[:top_k]  # descending; negation is exact
    if best.size < top_k:
        best = np.concatenate([best, np.full(top_k - best.size, -np.inf, dtype=np.float32)])
    return best


def first_stop(stops: torch.Tensor) -> torch.LongTensor:
    """Draft calls ``[B]`` from per-decision stop flags ``[B, T]``: first stop index + 1, or ``T + 1``."""
    num_decisions = stops.shape[-1]
    first = stops.int().argmax(-1) + 1
    return torch.where(stops.any(-1), first, torch.full_like(first, num_decisions + 1))


def draft_calls(actions: torch.Tensor) -> torch.LongTensor:
    """Draft calls ``[B]`` from per-decision actions ``[B, T]``: the first non-``CONTINUE`` ends drafting."""
    return first_stop(actions != CONTINUE)


def mask_late_skips(logits: torch.Tensor, first_decision: int = 0) -> torch.Tensor:
    """Logits ``[..., T, 3]`` with ``SKIP`` made impossible (``-inf``) after a cycle's first decision;
    the ``T`` decisions are the cycle's ``first_decision, first_decision + 1, ...``."""
    late = torch.arange(logits.shape[-2], device=logits.device) + first_decision > 0
    is_skip = torch.arange(logits.shape[-1], device=logits.device) == SKIP
    return logits.masked_fill(late[:, None] & is_skip, float("-inf"))


class HostCell:
    """RADAR's network for one draft step (the LSTM cell written out, then the MLP) in numpy on the host.

    The engine asks after every draft call with a handful of host-side scores; in torch the step is
    about 20 tiny ops whose dispatch (about 0.18 ms warm, 0.33 ms right after the target's forward on
    a 2-core CPU) costs more than the arithmetic. The weights are copied once (float32), the LSTM's two
    input matrices side by side, so that a step is three matrix-vector products.
    """

    def __init__(self, lstm: nn.LSTM, mlp: nn.Sequential):
        self.hidden_size = lstm.hidden_size
        input_weights = [host_array(lstm.weight_ih_l0), host_array(lstm.weight_hh_l0)]
        self.w_gates = np.concatenate(input_weights, axis=1)  # [4H, K + H]
        self.bias = host_array(lstm.bias_ih_l0) + host_array(lstm.bias_hh_l0)
        self.w_hidden, self.b_hidden = host_array(mlp[0].weight), host_array(mlp[0].bias)
        self.w_out, self.b_out = host_array(mlp[3].weight), host_array(mlp[3].bias)
        self.zeros = np.zeros(self.hidden_size, dtype=np.float32)  # (h, c) at a cycle's first step

    def step(self, x: np.ndarray, hidden: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, tuple]:
        """Logits ``[A]`` for scores ``x`` ``[top_k]`` (already clamped) and the next ``(h, c)``."""
        h, cell = hidden if hidden is not None else (self.zeros, self.zeros)
        gates = self.w_gates @ np.concatenate([x, h]) + self.bias
        size = self.hidden_size
        in_gate, forget_gate = gates[:size], gates[size : 2 * size]
        cell_input, out_gate = gates[2 * size : 3 * size], gates[3 * size :]
        cell = _sigmoid(forget_gate) * cell + _sigmoid(in_gate) * np.tanh(cell_input)
        h = _sigmoid(out_gate) * np.tanh(cell)
        mlp_hidden = np.maximum(self.w_hidden @ np.concatenate([h, x]) + self.b_hidden, 0.0)
        return self.w_out @ mlp_hidden + self.b_out, (h, cell)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large |x|


class _CycleMemory:
    """What a cycle's decisions carry from one to the next: the LSTM state ``(h, c)`` (``[lstm_hidden]`` each,
    None before the first) and whether the cycle skips. A plain object: ``nn.Module``'s attribute writes cost
    microseconds, and the engine waits on every decision."""

    __slots__ = ("hidden", "skipping")

    def __init__(self):
        self.hidden: tuple[np.ndarray, np.ndarray] | None = None
        self.skipping = False


class RadarPolicy(HostDecisions, DraftPolicy, nn.Module, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.radar"):
    """RADAR (RL-adjusted draft generation): after every draft step, continue or stop drafting.

    The network is the paper's: an LSTM over the sequence of beam-score vectors of the cycle's
    draft steps, and an MLP on ``[lstm_out ‖ scores]`` giving stop/continue logits. The hidden
    state is reset at each cycle start (:meth:`tree_config`). At inference the decision is
    deterministic: stop when P(stop) > 0.5 (RADAR's code samples it). Trees follow EAGLE-2's
    expansion with ``top_k`` beams and verify the best ``total_tokens - 1`` candidates; a cycle
    drafts at most ``depth`` levels, so the policy decides at most ``depth - 1`` times.

    ``allow_skip`` (our extension, not in RADAR) adds a third action at the first decision:
    ``SKIP``, verify nothing, so the cycle is a plain decoding step after one draft call. On a
    CPU, where verifying a tree costs ~1.4 one-token forwards, a cycle whose drafts look unlikely
    is cheaper as a plain step; RADAR's two actions cannot express that.

    Args:
        depth: most draft calls per cycle (RADAR: 8).
        top_k: beam width, also the policy's input size (RADAR: 10).
        total_tokens: tokens verified per cycle, root included (RADAR: 60).
        lstm_hidden: LSTM width (RADAR: 128).
        mlp_hidden: MLP width (RADAR: 128).
        dropout: dropout of the MLP during training (RADAR: 0.1).
        min_score: log-probs below it (and ``-inf`` padding) enter the network as ``min_score``.
        allow_skip: offer ``SKIP`` at the first decision (the MLP then has 3 outputs).
        lookup_first: where the prompt-lookup branch matched, the cycle verifies the chain alone and drafts
            nothing (as :class:`~hf_adaptive_spec.policies.LookupFirstPolicy`), so the network decides only the cycles
            lookup cannot fill. Train it on a dataset built with the branch and ``lookup_first``, as it is used.
        trained_on / trained_for_drafter / trained_with_lookup_tokens / trained_with_lookup_ngram_size: what it was
            trained on (cost curve, drafter, prompt-lookup branch), as ``config.json`` holds them; the engine compares
            them with each call's (:class:`~hf_adaptive_spec.policies.DraftPolicy`,
            :meth:`~hf_adaptive_spec.policies.serialization.PolicyHubMixin.mark_trained_on`).

    Example:
        >>> policy = RadarPolicy.from_pretrained("org/radar-smollm2")
        >>> out = model.generate(**inputs, assistant_model=drafter, assistant_policy=policy)
    """

    depth = TreeSetting("tree")
    top_k = TreeSetting("tree")
    total_tokens = TreeSetting("tree")

    def __init__(
        self,
        depth: int = 6,
        top_k: int = 3,
        total_tokens: int = 12,
        lstm_hidden: int = 128,
        mlp_hidden: int = 128,
        dropout: float = 0.1,
        min_score: float = -30.0,
        allow_skip: bool = False,
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
        for name, width in (("lstm_hidden", lstm_hidden), ("mlp_hidden", mlp_hidden)):
            check_number("RadarPolicy", name, width, at_least=1, integer=True, meaning="a layer's width")
        check_number("RadarPolicy", "dropout", dropout, at_least=0.0, below=1.0, meaning="the MLP's, in training")
        check_flag("RadarPolicy", "allow_skip", allow_skip)  # it sizes the network's output
        # `tree`, not `config`: Trainer assigns model.config.use_cache when a model has a config
        self.tree = policy_tree(type(self).__name__, depth=depth, top_k=top_k, total_tokens=total_tokens)
        self.min_score = min_score
        self.allow_skip = allow_skip
        self.lookup_first = lookup_first
        self.lstm = nn.LSTM(top_k, lstm_hidden, batch_first=True)
        self.mlp = nn.Sequential(  # RADAR's layout: mlp.0 and mlp.3 hold the weights
            nn.Linear(lstm_hidden + top_k, mlp_hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(mlp_hidden, 3 if allow_skip else 2),
        )
        self.check_settings()
        self._cycle = _CycleMemory()
        self.eval()

    def check_settings(self) -> None:
        """The tree, ``min_score`` and the flags as set now, and a tree and ``allow_skip`` the network still fits."""
        super().check_settings()
        check_top_k_tree("RadarPolicy", "tree", self.tree)
        if self.tree.reachable_depth < 2:  # total_tokens=2 drafts one level whatever depth says: nothing to decide
            raise ValueError(
                f"RadarPolicy decides after each draft step but the last, so it needs a tree that can draft 2 levels "
                f"or more (depth >= 2 and total_tokens >= 3), got {self.tree} (reaching depth "
                f"{self.tree.reachable_depth}): a StaticTreePolicy drafts such a tree."
            )
        # log-probs are <= 0: a floor at or above 0 makes every input the same; NaN or -inf makes NaN logits
        check_number("RadarPolicy", "min_score", self.min_score, above=-math.inf, below=0,
                     meaning="a floor on log-probabilities; RADAR: -30")
        check_flag("RadarPolicy", "allow_skip", self.allow_skip)
        check_flag("RadarPolicy", "lookup_first", self.lookup_first)
        if self.tree.top_k != self.lstm.input_size or self.allow_skip != (self.mlp[-1].out_features == 3):
            raise ValueError(
                f"RadarPolicy's network reads top_k={self.lstm.input_size} beam scores and has "
                f"{self.mlp[-1].out_features} actions, but the policy is set to top_k={self.tree.top_k}, "
                f"allow_skip={self.allow_skip}: keep the shape it was built with, or build and train a new policy."
            )

    def _current_settings(self) -> dict:
        settings = {**trained_on_setting(self), **tree_settings(self.tree), "min_score": self.min_score}
        # the dropout module's rate as it is now (set on ``mlp[2].p``, it was saved as built, for further training)
        return {**settings, "lookup_first": self.lookup_first, "dropout": self.mlp[2].p}

    def forward(
        self,
        scores: torch.Tensor,
        hidden: tuple[torch.Tensor, torch.Tensor] | None = None,
        first_decision: int = 0,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Action logits ``[B, T, 2 or 3]`` for beam scores ``[B, T, top_k]`` of ``T`` steps, and the LSTM state.

        ``first_decision`` is the index of the first of the ``T`` decisions in its cycle (the
        engine's step-by-step calls); ``SKIP`` logits after a cycle's first decision are ``-inf``. The scores (and
        ``hidden``) are taken in the network's dtype: a dataset's float32 scores feed a bfloat16 policy.
        """
        dtype = self.lstm.weight_ih_l0.dtype
        states = scores.to(dtype).clamp(min=self.min_score)
        if hidden is not None:
            hidden = (hidden[0].to(dtype), hidden[1].to(dtype))
        lstm_out, hidden = self.lstm(states, hidden)
        logits = self.mlp(torch.cat([lstm_out, states], dim=-1))
        return (mask_late_skips(logits, first_decision) if self.allow_skip else logits), hidden

    @staticmethod
    def decide(logits: torch.Tensor) -> torch.LongTensor:
        """The deterministic actions ``[..., T]`` for logits ``[..., T, A]``: ``STOP`` when P(stop) > 0.5
        (RADAR's rule, ties continue); with ``SKIP``, the most likely of the three actions."""
        stop_or_continue = torch.where(logits[..., STOP] > logits[..., CONTINUE], STOP, CONTINUE)
        if logits.shape[-1] == 2:
            return stop_or_continue
        skip = logits[..., SKIP] > logits[..., :SKIP].max(-1).values
        return torch.where(skip, SKIP, stop_or_continue)

    @torch.no_grad()
    def decisions(self, scores: torch.Tensor) -> torch.LongTensor:
        """Actions ``[B, depth - 1]`` of the deterministic policy teacher-forced on beam scores
        ``[B, depth - 1, top_k]``; those after the first non-``CONTINUE`` are never taken. Dropout is off. A
        half-precision policy decides in float32, as the engine's host copy of its weights does (:class:`HostCell`)."""
        if self.lstm.weight_ih_l0.dtype != torch.float32:
            return copy.deepcopy(self).float().decisions(scores.float())
        was_training = self.training
        self.eval()
        try:
            logits, _ = self(scores)
        finally:
            self.train(was_training)
        return self.decide(logits)

    def num_draft_calls(self, scores: torch.Tensor) -> torch.LongTensor:
        """Draft calls ``[B]`` the deterministic policy makes on beam scores ``[B, depth - 1, top_k]``.

        Call ``t`` (1-based) is the last one when the decision after it is the first stop (or
        skip); ``depth`` when it never stops.
        """
        return draft_calls(self.decisions(scores))

    def _copy_to_host(self) -> HostCell:
        return HostCell(self.lstm, self.mlp)

    def tree_config(self, state: CycleState) -> TreeConfig:
        """The fixed tree shape (nothing drafted where a lookup-first policy's branch matched); resets the LSTM
        state and turns dropout off for drafting."""
        if self.training:
            self.eval()
        self._cycle.hidden = None
        self._cycle.skipping = False
        return self.tree.lookup_first(state) if self.lookup_first else self.tree

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        """One LSTM step on this draft step's beam scores; continue unless P(stop) > 0.5 (or skip)."""
        logits = torch.from_numpy(self._next_logits(step.step_scores, first_decision=step.depth - 1))
        action = int(self.decide(logits))
        self._cycle.skipping = action == SKIP
        return action == CONTINUE

    def _next_logits(self, step_scores: torch.Tensor, first_decision: int) -> np.ndarray:
        """:meth:`forward` for one step of one cycle, ``[n]`` step scores -> ``[A]`` logits, carrying ``(h, c)``
        from the cycle's earlier steps: the LSTM cell written out in numpy on the host (:class:`HostCell`)."""
        x = np.maximum(_host_beam_scores(step_scores, self.tree.top_k), np.float32(self.min_score))
        logits, self._cycle.hidden = self.host().step(x, self._cycle.hidden)
        if self.allow_skip:
            logits = mask_late_skips(torch.from_numpy(logits)[None], first_decision)[0].numpy()
        return logits

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        """``total_tokens - 1`` candidates, or none after a ``SKIP``."""
        return 0 if self._cycle.skipping else info.config.total_tokens - 1

    def __repr__(self) -> str:
        c = self.tree
        return (
            f"RadarPolicy(depth={c.depth}, top_k={c.top_k}, total_tokens={c.total_tokens}, "
            f"lstm_hidden={self.lstm.hidden_size}, allow_skip={self.allow_skip}"
            + (", lookup_first=True)" if self.lookup_first else ")")
        )
