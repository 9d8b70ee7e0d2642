"""Turning one replayed cycle (the engine calls its policy) into steps (an agent answers each question).

:class:`SteppedCycle` runs :meth:`ReplayEnvironment.replay_cycle` in a worker thread whose policy
hooks hand the engine's ``DraftStepInfo`` / ``VerifySizeInfo`` to the caller and wait for its answer.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from ..policies.base import CycleState, DraftPolicy, DraftStepInfo, TreeConfig, VerifySizeInfo
from .replay import ReplayedCycle, ReplayEnvironment

Question = DraftStepInfo | VerifySizeInfo


class _Abort(Exception):
    """Raised in the worker's policy hooks when the agent abandons the cycle (reset or close)."""


_ABORT = object()


class _AgentPolicy(DraftPolicy):
    """Hands each question of a replayed cycle to the agent and blocks for its answer."""

    def __init__(self, config: TreeConfig, ask_verify_size: bool, questions: queue.Queue, answers: queue.Queue):
        self.config, self.ask_verify_size = config, ask_verify_size
        self.questions, self.answers = questions, answers

    def tree_config(self, state: CycleState) -> TreeConfig:
        return self.config

    def continue_drafting(self, step: DraftStepInfo) -> bool:
        return self._ask(step)

    def num_tokens_to_verify(self, info: VerifySizeInfo) -> int:
        return self._ask(info) if self.ask_verify_size else super().num_tokens_to_verify(info)

    def _ask(self, question: Question) -> Any:
        self.questions.put(question)
        answer = self.answers.get()
        if answer is _ABORT:
            raise _Abort
        return answer


class SteppedCycle:
    """One :meth:`ReplayEnvironment.replay_cycle` in a worker thread; each policy question is one step."""

    def __init__(
        self, replay: ReplayEnvironment, prompt: int, position: int, config: TreeConfig, ask_verify_size: bool
    ):
        self._questions: queue.Queue = queue.Queue()
        self._answers: queue.Queue = queue.Queue()
        policy = _AgentPolicy(config, ask_verify_size, self._questions, self._answers)
        self._thread = threading.Thread(
            target=self._run, args=(replay, prompt, position, policy), name="DraftStepEnv-cycle", daemon=True
        )
        self._thread.start()

    def _run(self, replay: ReplayEnvironment, prompt: int, position: int, policy: _AgentPolicy) -> None:
        try:
            self._questions.put(replay.replay_cycle(prompt, position, policy))
        except _Abort:
            pass
        except BaseException as error:  # re-raised by next() in the agent's thread
            self._questions.put(error)

    def next(self, answer: Any = None) -> Question | ReplayedCycle:
        """Answer the pending question (None at the start); return the next question or the finished cycle."""
        if answer is not None:
            self._answers.put(answer)
        item = self._questions.get()
        if isinstance(item, BaseException):
            self._thread.join()
            raise item
        if isinstance(item, ReplayedCycle):
            self._thread.join()
        return item

    def close(self) -> None:
        """End the worker (it raises :class:`_Abort` at its pending question) and wait for it."""
        if self._thread.is_alive():
            self._answers.put(_ABORT)
            self._thread.join()
