"""RADAR's draft policy: an LSTM over each draft step's beam scores decides continue or stop."""

from __future__ import annotations

import torch
from torch import nn

from ..base import CycleState, DraftPolicy, DraftStepInfo, TreeConfig
from ..serialization import PolicyHubMixin

#: action indices of the policy's logits (RADAR's order: ``probs[..., 0]`` is P(stop)).
STOP, CONTINUE = 0, 1


def beam_scores(step_scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """RADAR's state for one draft step: the ``top_k`` best cumulative log-probs, best first, ``[top_k]``.

    ``step_scores`` ``[n]`` are the scores of every candidate the step produced
    (``DraftStepInfo.step_scores``); the engine expands the ``top_k`` best of them next, so these
    are the scores of the next frontier (EAGLE's beam). Missing entries (``n < top_k``) are ``-inf``.
    """
    best = step_scores.float().topk(min(top_k, step_scores.numel())).values
    return torch.cat([best, best.new_full((top_k - best.numel(),), float("-inf"))])


def first_stop(stops: torch.Tensor) -> torch.LongTensor:
    """Draft calls ``[B]`` from per-decision stop flags ``[B, T]``: first stop index + 1, or ``T + 1``."""
    num_decisions = stops.shape[-1]
    first = stops.int().argmax(-1) + 1
    return torch.where(stops.any(-1), first, torch.full_like(first, num_decisions + 1))


class RadarPolicy(DraftPolicy, nn.Module, PolicyHubMixin, artifact_type="hf_adaptive_spec.policy.radar"):
    """RADAR (RL-adjusted draft generation): after every draft step, continue or stop drafting.

    The network is the paper's: an LSTM over the sequence of beam-score vectors of the cycle's
    draft steps, and an MLP on ``[lstm_out ‖ scores]`` giving stop/continue logits. The hidden
    state is reset at each cycle start (:meth:`tree_config`). At inference the decision is
    deterministic: stop when P(stop) > 0.5 (RADAR's code samples it). Trees follow EAGLE-2's
    expansion with ``top_k`` beams and verify the best ``total_tokens - 1`` candidates; a cycle
    drafts at most ``depth`` levels, so the policy decides at most ``depth - 1`` times.

    Args:
        depth: most draft calls per cycle (RADAR: 8).
        top_k: beam width, also the policy's input size (RADAR: 10).
        total_tokens: tokens verified per cycle, root included (RADAR: 60).
        lstm_hidden: LSTM width (RADAR: 128).
        mlp_hidden: MLP width (RADAR: 128).
        dropout: dropout of the MLP during training (RADAR: 0.1).
        min_score: log-probs below it (and ``-inf`` padding) enter the network as ``min_score``.

    Example:
        >>> policy = RadarPolicy.from_pretrained("org/radar-smollm2")
        >>> out = model.generate(**inputs, assistant_model=drafter, assistant_policy=policy)
    """

    def __init__(
        self,
        depth: int = 6,
        top_k: int = 3,
        total_tokens: int = 12,
        lstm_hidden: int = 128,
        mlp_hidden: int = 128,
        dropout: float = 0.1,
        min_score: float = -30.0,
    ):
        super().__init__()
        if depth < 2:
            raise ValueError(f"RadarPolicy needs depth >= 2 to have any decision to take, got {depth}.")
        # `tree`, not `config`: Trainer assigns model.config.use_cache when a model has a config
        self.tree = TreeConfig(depth=depth, top_k=top_k, total_tokens=total_tokens)
        self.min_score = min_score
        self.lstm = nn.LSTM(top_k, lstm_hidden, batch_first=True)
        self.mlp = nn.Sequential(  # RADAR's layout: mlp.0 and mlp.3 hold the weights
            nn.Linear(lstm_hidden + top_k, mlp_hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(mlp_hidden, 2)
        )
        self._hidden: tuple[torch.Tensor, torch.Tensor] | None = None
        self.eval()

    def forward(
        self, scores: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Stop/continue logits ``[B, T, 2]`` for beam scores ``[B, T, top_k]`` of ``T`` steps, and the LSTM state."""
        states = scores.clamp(min=self.min_score)
        lstm_out, hidden = self.lstm(states, hidden)
        return self.mlp(torch.cat([lstm_out, states], dim=-1)), hidden

    @torch.no_grad()
    def num_draft_calls(self, scores: torch.Tensor) -> torch.LongTensor:
        """Draft calls ``[B]`` the deterministic policy makes on beam scores ``[B, depth - 1, top_k]``.

        Call ``t`` (1-based) is the last one when the decision after it is the first stop;
        ``depth`` when it never stops. Dropout is off, as at inference.
        """
        was_training = self.training
        self.eval()
        try:
            logits, _ = self(scores)
        finally:
            self.train(was_training)
        return first_stop(logits[..., STOP] > logits[..., CONTINUE])

    def tree_config(self, state: CycleState) -> TreeConfig:
        """The fixed tree shape; resets the LSTM state and turns dropout off for drafting."""
        if self.training:
            self.eval()
        self._hidden = None
        return self.tree

    @torch.no_grad()
    def continue_drafting(self, step: DraftStepInfo) -> bool:
        """One LSTM step on this draft step's beam scores; continue unless P(stop) > 0.5."""
        scores = beam_scores(step.step_scores, self.tree.top_k).to(self.lstm.weight_ih_l0.device)
        logits, self._hidden = self(scores[None, None], self._hidden)
        return bool(logits[0, 0, STOP] <= logits[0, 0, CONTINUE])

    def __repr__(self) -> str:
        c = self.tree
        return (
            f"RadarPolicy(depth={c.depth}, top_k={c.top_k}, total_tokens={c.total_tokens}, "
            f"lstm_hidden={self.lstm.hidden_size})"
        )
