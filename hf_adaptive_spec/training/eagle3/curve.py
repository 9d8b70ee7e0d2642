"""The learning curve of an EAGLE-3 drafter: its points (:class:`HeldOutPoint`, what :class:`~.heldout.HeldOutSet`
measures), the ``heldout_curve.jsonl`` file a drafter folder keeps them in, and the callback that measures them while
the drafter trains, continuing an earlier stage's curve."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from transformers import TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

from ...core.files import write_text_atomically
from ...drafters.eagle3.modeling import Eagle3DraftModel

if TYPE_CHECKING:
    from .heldout import HeldOutSet

logger = logging.getLogger(__name__)

CURVE_FILE = "heldout_curve.jsonl"


@dataclass
class HeldOutPoint:
    """One point of the learning curve.

    Args:
        step: optimizer steps since the drafter was initialised (earlier stages included), as far as the curve knows:
            a stage whose ``init_from`` holds no curve counts from its own start (a warning says so).
        input_tokens_seen: non-padding tokens trained on since initialisation (counted as ``step`` is).
        first_draft_acceptance: share of held-out answer positions whose first draft is the target's
            argmax; ``None`` for points of curves written before out-of-vocabulary tokens were counted.
        step_accuracy: the same share for each draft depth (teacher-forced).
        chain_tau: τ of a greedy chain of depth ``len(step_accuracy)``, over every answer position.
        positions: held-out positions measured.
        decoding_tau: τ of the same chains walked cycle by cycle as ``generate`` decodes the answers;
            ``None`` for points measured before 2026-11-29.
        in_vocabulary_acceptance: first-draft acceptance on the positions whose token the draft
            vocabulary holds (what curves before 2026-11-27 called first-draft acceptance).
        draft_vocab_coverage: share of the answer positions whose token the draft vocabulary holds.
        copy_share: share of the answer positions whose token a prompt lookup would have proposed;
            ``None`` for points measured before 2026-11-30.
        copy_step_accuracy: ``step_accuracy`` on those positions alone.
        target_dtype: the dtype the target ran in (its features and its argmax); ``None`` for points
            measured before 2026-11-30, all in float32.
        drafter_shape: the drafter's layers, MLP width and draft vocabulary (:func:`drafter_shape`);
            ``None`` for points measured before 2026-12-01.
        heldout_set: a digest of the held-out conversations' tokens (:attr:`HeldOutSet.digest`); ``None`` for
            points measured before 2026-12-05, on the first 64 conversations of the file read, some of which
            opened with a prompt the training data held (:func:`without_training_prompts`).
        heldout_trained: how many of the held-out conversations open with a prompt the run had trained on when the
            point was measured (a stream's records appended after the set was built: the point measures them too);
            ``None`` for points measured before it was counted.
    """

    step: int
    input_tokens_seen: int
    first_draft_acceptance: float | None
    step_accuracy: list[float]
    chain_tau: float
    positions: int
    in_vocabulary_acceptance: float | None = None
    draft_vocab_coverage: float | None = None
    decoding_tau: float | None = None
    copy_share: float | None = None
    copy_step_accuracy: list[float] | None = None
    target_dtype: str | None = None
    drafter_shape: str | None = None
    heldout_set: str | None = None
    heldout_trained: int | None = None

    @property
    def measured_in(self) -> str:
        """The target's dtype at this point (float32 for points saved before it was recorded)."""
        return self.target_dtype or "float32"

    @classmethod
    def from_json(cls, record: dict) -> HeldOutPoint:
        """A saved point; one saved before coverage was measured held in-vocabulary acceptance only."""
        if "draft_vocab_coverage" not in record:
            record = {
                **record, "first_draft_acceptance": None, "in_vocabulary_acceptance": record["first_draft_acceptance"]
            }
        return cls(**record)


def drafter_shape(draft: Eagle3DraftModel) -> str:
    """What a held-out point's drafter is, in the terms a later stage can change (``init_from`` widens and deepens)."""
    config = draft.config
    return (
        f"layers {config.num_hidden_layers}, MLP {config.intermediate_size}, draft vocabulary {config.draft_vocab_size}"
    )


def read_curve(folder: str | Path) -> list[HeldOutPoint]:
    """The learning curve saved in a drafter folder, or a curve file itself (empty when there is none)."""
    path = Path(folder)
    if path.is_dir():
        path = path / CURVE_FILE
    if not path.is_file():
        return []
    return [
        HeldOutPoint.from_json(json.loads(line))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def write_curve(folder: str | Path, points: list[HeldOutPoint]) -> None:
    """Write ``points`` as the folder's learning curve (one JSON object a line)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(asdict(p)) + "\n" for p in points)
    write_text_atomically(Path(folder) / CURVE_FILE, text)  # rewritten at every point: a reader never meets half


class HeldOutCurveCallback(TrainerCallback):
    """Measures the held-out curve at the start, every ``every_steps`` optimizer steps and at the end.

    The points go to ``trainer.state.log_history`` and to ``heldout_curve.jsonl`` in the output
    directory (and in every saved drafter folder, by :class:`Eagle3Trainer`). A drafter started
    from an earlier stage's folder continues that folder's curve: ``previous`` is its curve, and
    steps and tokens count from its last point.

    ``trained_prompts`` gives the prompt digests the run has trained on so far (a stream's records read during the run
    included): a point counts the held-out conversations among them (:attr:`HeldOutPoint.heldout_trained`), with a
    warning when that count grows.
    """

    def __init__(
        self, held_out: HeldOutSet, every_steps: int, previous: list[HeldOutPoint] | None = None,
        trained_prompts: Callable[[], AbstractSet[str]] | None = None,
    ):
        if every_steps < 1:
            raise ValueError(f"every_steps must be at least 1, got {every_steps}.")
        self.held_out, self.every_steps, self.trained_prompts = held_out, every_steps, trained_prompts
        self._trained_counted = 0
        self.points = list(previous or [])
        last = self.points[-1] if self.points else None
        self.step_offset = last.step if last else 0
        self.token_offset = last.input_tokens_seen if last else 0
        self._measured_step: int | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step > 0:  # resumed: the checkpoint's curve holds every point up to it
            self.points = self._points_up_to_checkpoint(args, state)
        last = self.points[-1] if self.points else None
        draft = model.module if hasattr(model, "module") else model
        if (
            last is None
            or last.step < self.step_offset + state.global_step
            or last.measured_in != self.held_out.target_dtype  # a target in another dtype starts its own first point
            or last.heldout_set != self.held_out.digest  # so do other held-out conversations
            or len(last.step_accuracy) != self.held_out.depth  # and another chain depth (its τ is another measure)
            # so does a widened or deepened drafter, or one of unknown shape, at a stage's start (a resumed run's
            # checkpoint holds its own points)
            or (state.global_step == 0 and last.drafter_shape != drafter_shape(draft))
        ):
            self.measure(args, state, model)

    def _points_up_to_checkpoint(self, args, state) -> list[HeldOutPoint]:
        """The resumed checkpoint's curve up to its step (the points before it are not measured again); the
        curve this callback started with when the checkpoint holds none."""
        checkpoint = args.resume_from_checkpoint
        folder = (
            checkpoint
            if isinstance(checkpoint, str) and Path(checkpoint).is_dir()
            else get_last_checkpoint(args.output_dir)
        )
        saved = read_curve(folder) if folder else []
        return [p for p in saved if p.step <= self.step_offset + state.global_step] if saved else self.points

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every_steps == 0:
            self.measure(args, state, model)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self.measure(args, state, model)

    def measure(self, args, state, model) -> None:
        """Add the point of ``model`` at ``state``'s step (once a step; on the main process only)."""
        if self._measured_step == state.global_step or not state.is_world_process_zero:
            return
        self._measured_step = state.global_step
        draft = model.module if hasattr(model, "module") else model
        point = self.held_out.point(
            draft, self.step_offset + state.global_step, self.token_offset + state.num_input_tokens_seen
        )
        point.heldout_trained = self._held_out_trained(point.step)
        self.points.append(point)
        state.log_history.append({"step": state.global_step, **{f"heldout_{k}": v for k, v in asdict(point).items()}})
        logger.info(
            "held-out at step %d (%d tokens): first-draft acceptance %.4f (%.4f of the %.3f in the draft vocabulary), "
            "chain tau(%d) %.4f, decoding tau %.4f; on the %.3f a prompt lookup would copy %.4f (target in %s)",
            point.step, point.input_tokens_seen, point.first_draft_acceptance, point.in_vocabulary_acceptance,
            point.draft_vocab_coverage, self.held_out.depth, point.chain_tau, point.decoding_tau,
            point.copy_share, point.copy_step_accuracy[0], point.measured_in,
        )
        write_curve(args.output_dir, self.points)

    def _held_out_trained(self, step: int) -> int:
        """How many held-out conversations open with a prompt the run has trained on so far, said in a warning when
        the count grows: their points measure trained data."""
        trained = self.trained_prompts() if self.trained_prompts else frozenset()
        count = len(self.held_out.prompts & trained)
        if count > self._trained_counted:
            logger.warning(
                "%d of the %d held-out conversations open with a prompt this run has trained on since the held-out "
                "set was built (records the stream read): the curve's points from step %d on measure them too "
                "(heldout_trained). Keep the held-out prompts out of the file the stream reads "
                "(regenerate_sharegpt.py --exclude_ids_from).", count, len(self.held_out.prompts), step,
            )
            self._trained_counted = count
        return count
