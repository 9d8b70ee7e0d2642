"""The EAGLE-3 training script (``trainers/eagle3.py``, ``hf-adaptive-spec train eagle3``).

    python trainers/eagle3.py --config trainers/recipes/eagle3_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/eagle3.py --config ... --ddp_backend gloo

Any ``Eagle3Config`` / ``transformers.TrainingArguments`` field and any
``Eagle3ScriptArguments`` field can be set in the YAML file or on the command line.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
from datasets import Dataset
from transformers import set_seed
from trl import TrlParser

from ...core.values import check_number
from ...drafters.eagle3.modeling import Eagle3DraftModel
from ..base import DrafterScriptArguments, load_target, run_training_script
from ..resume import resumed_checkpoint
from ..script_logging import asked_log_level
from ..step_profile import StepProfileCallback
from ..time_budget import stable_point_callback, time_budget
from .config import DEFAULT_DRAFT_VOCAB_SIZE, Eagle3Config
from .curve import CURVE_FILE, HeldOutCurveCallback, read_curve
from .data import (
    ConversationStream,
    build_draft_vocabulary,
    check_vocabulary_coverage,
    collate,
    load_samples,
    padding_id,
)
from .heldout import HeldOutSet
from .initialization import deepen, initialize_drafter, widen_mlp, widen_vocabulary
from .lineage import Lineage, lineage_before, prompt_digests
from .trainer import Eagle3Trainer

logger = logging.getLogger(__name__)

#: the folder in ``output_dir`` a ``warmup_stable_decay`` run saves its stable point to
STABLE_POINT_DIR = "stable"


@dataclass
class Eagle3ScriptArguments(DrafterScriptArguments):
    """Data and model arguments of the EAGLE-3 training script (the target and the card's names:
    :class:`DrafterScriptArguments`)."""

    #: the arguments naming local files or folders the run reads, checked before any model loads
    local_inputs: ClassVar[tuple[str, ...]] = ("dataset_path", "heldout_path")
    #: those of them that name a file (a JSONL file each), not a folder
    local_input_files: ClassVar[tuple[str, ...]] = ("dataset_path", "heldout_path")

    dataset_path: str = field(
        metadata={"help": "JSONL of {'conversation': [...]} records, e.g. from trainers/regenerate_sharegpt.py."},
    )
    num_conversations: int | None = field(default=None, metadata={"help": "Use only the first N conversations."})
    target_dtype: str = field(
        default="float32",
        metadata={
            "help": "dtype the frozen target runs in: float32, or bfloat16 (the features and argmax bfloat16 inference "
            "gives the drafter, and a cheaper target forward). The drafter keeps float32 weights either way; "
            "bf16: true trains it in mixed precision.",
            "choices": ["float32", "bfloat16"],
        },
    )
    stream: bool = field(
        default=False,
        metadata={"help": "Re-read dataset_path at every pass (it may still be growing); needs max_steps. Each pass is "
                  "shuffled with seed (data_seed and train_sampling_strategy are refused with it)."},
    )
    init_from: str | None = field(
        default=None,
        metadata={"help": "Start from this drafter checkpoint (its draft vocabulary and held-out curve are kept)."},
    )
    heldout_path: str | None = field(
        default=None,
        metadata={"help": "JSONL of held-out conversations the target answered: measure the learning curve on them."},
    )
    heldout_conversations: int = field(default=64, metadata={"help": "Held-out conversations measured."})
    heldout_every_steps: int = field(
        default=25, metadata={"help": "Measure the held-out curve every N optimizer steps."}
    )
    heldout_depth: int = field(default=3, metadata={"help": "Chain depth of the held-out tau."})
    heldout_max_length: int | None = field(
        default=None,
        metadata={"help": "Tokens kept per held-out conversation (default: max_length); keep it fixed across stages."},
    )
    max_train_minutes: float | None = field(
        default=None,
        metadata={
            "help": "Stop after this many minutes of training, with the learning-rate schedule run over that time "
            "(a stage sized for a working block or a lent GPU); max_steps still ends the run if reached first."
        },
    )
    decay_ratio: float | None = field(
        default=None,
        metadata={
            "help": "With max_train_minutes and lr_scheduler_type warmup_stable_decay: the share of the budget over "
            "which the rate decays to zero after holding its peak. A warmup_stable_decay run whose decay begins saves "
            f"output_dir/{STABLE_POINT_DIR} (pushed with the drafter), the drafter at that moment: the folder a next "
            "stage resumes from (init_from)."
        },
    )
    profile_steps: int = field(
        default=0,
        metadata={
            "help": "Profile this many optimizer steps with torch.profiler, after three unprofiled ones, and write the "
            "operator table to output_dir/step_profile.txt: where a step's time goes on this machine (0: off)."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        owner = "Eagle3ScriptArguments"
        if self.num_conversations is not None:  # 0 failed after the target loaded, in torch's sampler
            check_number(owner, "num_conversations", self.num_conversations, at_least=1,
                         integer=True, meaning="the first N conversations; unset: all")
        # checked before the target loads, under their own names
        check_number(owner, "heldout_conversations", self.heldout_conversations, at_least=1, integer=True,
                     meaning="held-out conversations measured")
        check_number(owner, "heldout_every_steps", self.heldout_every_steps, at_least=1, integer=True,
                     meaning="measure the curve every N optimizer steps")
        check_number(owner, "heldout_depth", self.heldout_depth, at_least=1, integer=True,
                     meaning="chain depth of the held-out tau")
        if self.heldout_max_length is not None:
            check_number(owner, "heldout_max_length", self.heldout_max_length, at_least=2, integer=True,
                         meaning="tokens kept per held-out conversation; unset: max_length")


def heldout_callbacks(
    script_args: Eagle3ScriptArguments, target, tokenizer, draft, max_length: int, samples: list[dict],
    trained_before: AbstractSet[str] = frozenset(), trained_so_far: Callable[[], AbstractSet[str]] | None = None,
) -> list:
    """The held-out curve's callback (continuing ``init_from``'s curve), or none without ``heldout_path``; the
    held-out conversations that open with a prompt of the training ``samples``, or of the stages before
    (``trained_before``), are left out, and those a stream trains on later are counted at each point
    (``trained_so_far``: the prompt digests trained on so far)."""
    if not script_args.heldout_path:
        return []
    held_out = HeldOutSet.from_jsonl(
        target, tokenizer, script_args.heldout_path, draft, script_args.heldout_max_length or max_length,
        script_args.heldout_conversations, script_args.heldout_depth, training=samples, trained_before=trained_before,
        length_name="heldout_max_length" if script_args.heldout_max_length else "max_length (heldout_max_length unset)",
    )
    return [HeldOutCurveCallback(held_out, script_args.heldout_every_steps, previous_curve(script_args.init_from),
                                 trained_so_far)]


def previous_curve(init_from: str | None) -> list:
    """``init_from``'s held-out curve, which this stage's continues (none for a new drafter); a drafter without one
    is warned about: this stage's curve then counts steps and tokens from its own start, not the drafter's."""
    previous = read_curve(init_from) if init_from else []
    if init_from and not previous:
        logger.warning(
            "init_from %s holds no held-out curve (%s): this stage's curve counts its steps and tokens from this "
            "stage's start, not from the drafter's initialisation, since the earlier stages' are unknown.",
            init_from, CURVE_FILE,
        )
    return previous


@contextlib.contextmanager
def curve_points_shown(script_args: Eagle3ScriptArguments, training_args: Eagle3Config):
    """Show the held-out curve's points (info messages) during the run under the default ``--log_level passive``: the
    training logger at INFO, with a stderr handler where logging has none, both as they were once the run ends (a
    script used as a library leaves the application's logging alone). An explicit ``--log_level`` is kept as asked:
    ``warning`` hides the points, as it hides every info message."""
    training_logger = logging.getLogger("hf_adaptive_spec.training")
    if (not script_args.heldout_path or asked_log_level(training_args) != "passive"
            or training_logger.isEnabledFor(logging.INFO)):
        yield
        return
    level, handler = training_logger.level, None
    if not training_logger.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        training_logger.addHandler(handler)
    training_logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        training_logger.setLevel(level)
        if handler is not None:
            training_logger.removeHandler(handler)


def build_drafter(script_args: Eagle3ScriptArguments, training_args: Eagle3Config, target, samples,
                  resumed: str | None) -> Eagle3DraftModel:
    """The drafter to train, in float32 whatever the target's dtype: a resumed run's checkpoint's (``resumed``, as
    :func:`~hf_adaptive_spec.training.resume.resumed_checkpoint` finds it: its shape and draft vocabulary, as the data
    a stream has grown meanwhile would build another vocabulary), ``init_from``'s (widened to
    ``draft_intermediate_size`` and ``draft_vocab_size``, deepened to ``draft_num_hidden_layers``, where those are
    larger), or a new one with the configured vocabulary, width, depth and starting point, its random weights drawn
    from ``training_args.seed``."""
    width, vocab_size = training_args.draft_intermediate_size, training_args.draft_vocab_size
    depth = training_args.draft_num_hidden_layers
    if resumed:  # the Trainer loads its weights again as it resumes
        return Eagle3DraftModel.from_pretrained(resumed, target=target, dtype=torch.float32)
    if script_args.init_from:
        if training_args.initialization != "random":
            raise ValueError(
                f"initialization={training_args.initialization!r} sets a new drafter's starting point, but init_from "
                f"loads a trained one ({script_args.init_from}). Drop one of the two."
            )
        draft = Eagle3DraftModel.from_pretrained(script_args.init_from, target=target, dtype=torch.float32)
        draft = widen_mlp(draft, width, seed=training_args.seed) if width else draft
        draft = deepen(draft, depth, seed=training_args.seed) if depth else draft
        if not vocab_size:
            return draft
        kept = draft.draft_to_target()
        return widen_vocabulary(
            draft, target, build_draft_vocabulary(samples, vocab_size, target.config.vocab_size, keep=kept)
        )
    vocabulary = build_draft_vocabulary(samples, vocab_size or DEFAULT_DRAFT_VOCAB_SIZE, target.config.vocab_size)
    shape = {"intermediate_size": width, "num_hidden_layers": depth}
    set_seed(training_args.seed)  # a new drafter's random weights are the run's seed's (the Trainer seeds only after)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary, dtype=torch.float32,
                                         **{k: v for k, v in shape.items() if v})
    return initialize_drafter(draft, target, training_args.initialization)


def make_parser() -> TrlParser:
    return TrlParser((Eagle3ScriptArguments, Eagle3Config))


def training_data(script_args: Eagle3ScriptArguments, training_args: Eagle3Config, tokenizer, samples: list[dict],
                  before: Lineage) -> tuple[Dataset | ConversationStream, Callable[[], Lineage]]:
    """The dataset the trainer reads (``samples``, or the file re-read each pass with ``stream``), and what gives the
    lineage trained on so far for ``trained_prompts.json``: the stages ``before``, ``samples`` and the records a
    stream read after they were loaded."""
    trained = before.extended(prompt_digests(samples))
    if not script_args.stream:
        return Dataset.from_list(samples), lambda: trained
    stream = ConversationStream(script_args.dataset_path, tokenizer, training_args.max_length, training_args.seed,
                                limit=script_args.num_conversations)
    return stream, lambda: trained.extended(stream.prompts_read)


def build_trainer(script_args: Eagle3ScriptArguments, training_args: Eagle3Config, budget) -> Eagle3Trainer:
    """The target, the data, the drafter and the trainer with its callbacks (the held-out curve, the time budget and
    its stable point, the step profile)."""
    target, tokenizer = load_target(script_args.target_model_name_or_path, script_args.target_dtype)
    target = target.to(training_args.device)  # before the held-out set runs it (on a GPU, not on the CPU first)
    samples = load_samples(tokenizer, script_args.dataset_path, training_args.max_length, script_args.num_conversations)
    resumed = resumed_checkpoint(training_args)
    draft = build_drafter(script_args, training_args, target, samples, resumed)
    if resumed or script_args.init_from:  # as from_pretrained names it: the coverage check names the checkpoint
        draft.config.name_or_path = resumed or script_args.init_from
    # before the held-out set runs the target (the trainer checks a dataset with a length again, a stream not; it
    # names the same drafter and fix, so its warning is not logged twice)
    check_vocabulary_coverage(draft, samples, draft.config.name_or_path or None, resumed=resumed)
    before = lineage_before(script_args.init_from)
    dataset, lineage = training_data(script_args, training_args, tokenizer, samples, before)
    trainer = Eagle3Trainer(
        model=draft,
        args=training_args,
        target_model=target,
        train_dataset=dataset,
        lineage=lineage,
        init_from=script_args.init_from,
        data_collator=functools.partial(collate, pad_token_id=padding_id(tokenizer)),
        dataset_name=script_args.card_dataset_name(script_args.dataset_path),
        reproduce_command=script_args.reproduce_command,
        base_model=script_args.base_model,
        callbacks=[
            *heldout_callbacks(script_args, target, tokenizer, draft, training_args.max_length, samples,
                               before.prompts, lambda: lineage().prompts),
            *([budget] if budget else []),
            *([StepProfileCallback(script_args.profile_steps)] if script_args.profile_steps else []),
        ],
    )
    stable_dir = str(Path(training_args.output_dir) / STABLE_POINT_DIR)
    stable_point = stable_point_callback(training_args, budget,
                                         functools.partial(trainer.save_stable_point, stable_dir))
    if stable_point:
        trainer.add_callback(stable_point)
    return trainer


def check_stream_settings(script_args: Eagle3ScriptArguments, training_args: Eagle3Config) -> None:
    """Refuse, with ``stream``, the settings a stream cannot follow: data-loading workers (each would yield every
    conversation), and the sampler's settings, ``data_seed`` and ``train_sampling_strategy`` (a stream has no sampler:
    each pass shuffles the file with ``seed`` and the pass number, :class:`~.data.ConversationStream`)."""
    if not script_args.stream:
        return
    if training_args.dataloader_num_workers:
        raise ValueError(
            "stream reads the conversation file in one process: with dataloader_num_workers="
            f"{training_args.dataloader_num_workers} each worker would yield every conversation. Set it to 0."
        )
    ignored = [f"{name}={value!r}" for name, value, default in (
        ("data_seed", training_args.data_seed, None),
        ("train_sampling_strategy", training_args.train_sampling_strategy, "random"),
    ) if value != default]
    if ignored:
        raise ValueError(
            f"stream orders the conversations itself (each pass shuffled with seed={training_args.seed} and the "
            f"pass number, then sorted by length in chunks), so {' and '.join(ignored)} would be ignored: a stream "
            "has no sampler. Drop them (seed sets the stream's order), or train without stream."
        )


def main(script_args: Eagle3ScriptArguments, training_args: Eagle3Config) -> Eagle3Trainer:
    """Build the data, the drafter and the trainer; train, save (and push); return the trainer."""
    check_stream_settings(script_args, training_args)
    budget = time_budget(script_args.max_train_minutes, script_args.decay_ratio, training_args)  # checked first
    with curve_points_shown(script_args, training_args):
        trainer = build_trainer(script_args, training_args, budget)
        trainer.train_save_and_push()
    return trainer


def run(argv: list[str] | None = None) -> int:
    """Parse argv (YAML via --config) and train."""
    return run_training_script(make_parser(), main, argv, Eagle3Trainer)
