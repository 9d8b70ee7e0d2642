"""Scripted stand-ins for benchmark methods (no model call) and hand-made records."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from hf_adaptive_spec.bench.methods import BenchMethod
from hf_adaptive_spec.bench.records import QuestionRecord, TurnRecord


@dataclass
class FakeStats:
    """Shaped like ``hf_adaptive_spec.SpeculationStats``."""

    accepted_lengths: list[int] = field(default_factory=lambda: [2, 0, 3])
    draft_depths: list[int] = field(default_factory=lambda: [3, 3, 3])
    verified_tokens: list[int] = field(default_factory=lambda: [4, 4, 4])
    draft_time: float = 0.01
    verify_time: float = 0.02
    verify_times: list[float] = field(default_factory=lambda: [0.005, 0.007, 0.008])
    policy_time: float = 0.001


class ScriptedMethod(BenchMethod):
    """Returns ``tokens`` for every prompt and logs ``(name, prompt)`` to the shared ``calls`` list."""

    name = "scripted"

    def __init__(self, label: str, tokens: list[int], calls: list, stats: FakeStats | None = None):
        self.label, self.tokens, self.calls, self.stats = label, tokens, calls, stats

    def method_kwargs(self, model, tokenizer, options):
        return {}

    def generate(self, input_ids: torch.LongTensor):
        self.calls.append((self.label, input_ids[0].tolist()))
        return list(self.tokens), self.stats


def turn(tokens: int, seconds: float, **fields) -> TurnRecord:
    return TurnRecord(turn=0, new_tokens=tokens, wall_time=seconds, identical=fields.pop("identical", True), **fields)


def record(qid: int, method: str, *turns: TurnRecord, category: str = "writing") -> QuestionRecord:
    return QuestionRecord(qid, category, method, list(turns))


def hand_made_records() -> list[QuestionRecord]:
    """stock: 10/s, 5/s, 5/s (50 tokens in 9 s); fast: 2x, 6x, 2x faster (50 tokens in 2.5 s)."""
    stats = dict(draft_time=0.1, verify_time=0.2, policy_time=0.05)

    def cycles(*accepted: int) -> dict:  # each cycle drafted 3 levels and verified 4 tokens
        n = len(accepted)
        return dict(accepted_lengths=list(accepted), draft_depths=[3] * n, verified_tokens=[4] * n, **stats)

    return [
        record(1, "stock", turn(5, 0.5, target_passes=5), turn(5, 0.5, target_passes=5)),
        record(1, "fast", turn(5, 0.25, **cycles(2, 0)), turn(5, 0.25, **cycles(3))),
        record(2, "stock", turn(30, 6.0, target_passes=30), category="math"),
        record(2, "fast", turn(30, 1.0, **cycles(3, 3)), category="math"),
        record(3, "stock", turn(10, 2.0, target_passes=10)),
        record(3, "fast", turn(10, 1.0, identical=False, first_mismatch=4, **cycles(1))),
    ]
