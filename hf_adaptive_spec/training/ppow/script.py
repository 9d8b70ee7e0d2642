"""The PPOW training script (``trainers/ppow.py``, ``hf-adaptive-spec train ppow``).

    python trainers/ppow.py --config trainers/recipes/ppow_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/ppow.py --config ... --ddp_backend gloo

Any ``PPOWConfig`` / ``transformers.TrainingArguments`` field and any ``PPOWScriptArguments``
field can be set in the YAML file or on the command line.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import ClassVar

from datasets import Dataset
from trl import TrlParser

from ...drafters.eagle3.modeling import Eagle3DraftModel
from ..base import DrafterScriptArguments, load_target, run_training_script
from ..eagle3.data import collate, load_samples, padding_id
from ..eagle3.lineage import lineage_before, prompt_digests
from .config import PPOWConfig
from .trainer import PPOWTrainer, has_window

logger = logging.getLogger(__name__)


@dataclass
class PPOWScriptArguments(DrafterScriptArguments):
    """Data and model arguments of the PPOW script (the target and the card's names:
    :class:`DrafterScriptArguments`)."""

    #: the arguments naming local files or folders the run reads, checked before any model loads
    local_inputs: ClassVar[tuple[str, ...]] = ("dataset_path",)

    drafter_name_or_path: str = field(metadata={"help": "The supervised EAGLE-3 drafter to post-train (local or Hub)."})
    dataset_path: str = field(
        metadata={"help": "JSONL of {'conversation': [...]} records; answers from the target itself are best "
                  "(the proximity reward's greedy reference window is then exact)."},
    )
    num_conversations: int | None = field(default=None, metadata={"help": "Use only the first N conversations."})
    ignore_target_mismatch: bool = field(
        default=False,
        metadata={
            "help": "Post-train a drafter saved for a target of another depth on purpose (Eagle3DraftModel."
            "from_pretrained's ignore_target_mismatch); its feature layers follow the target's."
        },
    )


def make_parser() -> TrlParser:
    return TrlParser((PPOWScriptArguments, PPOWConfig))


def windowed_samples(samples: list[dict[str, list[int]]], args: PPOWConfig) -> list[dict[str, list[int]]]:
    """The samples where a window fits (:func:`~hf_adaptive_spec.training.ppow.trainer.has_window`); the others, short
    answers or answers ``max_length`` cut, are dropped with a warning (a batch drawing one stopped training)."""
    kept = [sample for sample in samples if has_window(sample["loss_mask"], args.window_size)]
    if not kept:
        raise ValueError(
            f"No conversation has {args.window_size} assistant tokens in a row within max_length={args.max_length}: "
            "lower window_size, raise max_length or give conversations with longer answers."
        )
    if len(kept) < len(samples):
        logger.warning(
            "%d of %d conversations dropped: no %d assistant tokens in a row within max_length=%d, so no window to "
            "sample", len(samples) - len(kept), len(samples), args.window_size, args.max_length,
        )
    return kept


def main(script_args: PPOWScriptArguments, training_args: PPOWConfig) -> PPOWTrainer:
    """Load target, drafter and conversations; post-train, save (and push); return the trainer."""
    target, tokenizer = load_target(script_args.target_model_name_or_path)
    drafter = Eagle3DraftModel.from_pretrained(
        script_args.drafter_name_or_path, target=target, ignore_target_mismatch=script_args.ignore_target_mismatch
    ).float()
    samples = load_samples(tokenizer, script_args.dataset_path, training_args.max_length, script_args.num_conversations)
    samples = windowed_samples(samples, training_args)
    lineage = lineage_before(script_args.drafter_name_or_path).extended(prompt_digests(samples))
    trainer = PPOWTrainer(
        model=drafter,
        args=training_args,
        target_model=target,
        train_dataset=Dataset.from_list(samples),
        data_collator=functools.partial(collate, pad_token_id=padding_id(tokenizer)),
        dataset_name=script_args.card_dataset_name(script_args.dataset_path),
        reproduce_command=script_args.reproduce_command,
        base_model=script_args.base_model,
        drafter_name_or_path=script_args.drafter_name_or_path,
        lineage=lambda: lineage,
    )
    trainer.train_save_and_push()
    return trainer


def run(argv: list[str] | None = None) -> int:
    """Parse argv (YAML via --config) and train."""
    return run_training_script(make_parser(), main, argv, PPOWTrainer)
