"""Prompt + completion records for DVI's replay rollout, from JSONL files of target-answered conversations."""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedTokenizerBase
from transformers.utils import logging

from ...training_data.jsonl_output import read_conversation_records
from ...training_data.leakage import leaks
from ...training_data.regenerate import answer_token_ids, closing_ids, prompt_ids

logger = logging.get_logger(__name__)


class UnalignedRecordError(ValueError):
    """The chat template renders a record's prompt differently inside its conversation: its answer has no start."""


def completion_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict], prompt: list[int]) -> list[int]:
    """Tokens of the assistant turn ``messages[-1]`` after ``prompt`` (the tokens of ``messages[:-1]`` with the
    generation prompt), through the end-of-turn token (without one for an answer marked ``truncated``:
    ``max_new_tokens`` cut it, and the target went on).

    An answer with ``token_ids`` (the ids the target generated after ``prompt``: regeneration keeps them) is those
    ids, then the template's end of the turn (:func:`_end_of_turn`). An answer without (files regenerated before the
    ids were kept) is re-encoded from its text: when the conversation's tokens start with ``prompt``, the answer is
    what follows. A tokenizer may merge the prompt's last token with the answer's first instead (ChatML's
    ``assistant\\n`` and an answer starting with ``\\n`` encode as one ``\\n\\n`` token); the answer is then the
    conversation's text after the prompt's text, encoded on its own, as the target generated it after ``prompt``.

    Raises:
        UnalignedRecordError: the conversation's text does not start with the prompt's text either.
        ValueError: the answer's ``token_ids`` do not decode to its text with ``tokenizer``.
    """
    truncated = bool(messages[-1].get("truncated"))
    generated = answer_token_ids(tokenizer, messages[-1])
    if generated is not None:
        return generated if truncated else generated + _end_of_turn(tokenizer, messages)
    text = tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=truncated)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if ids[: len(prompt)] == prompt:
        answer = ids[len(prompt) :]
    else:
        prompt_text = tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True, tokenize=False)
        if not text.startswith(prompt_text):
            raise UnalignedRecordError("the chat template renders the prompt differently inside the conversation")
        answer = tokenizer(text[len(prompt_text) :], add_special_tokens=False)["input_ids"]
    return _through_eos(tokenizer, answer)


def _end_of_turn(tokenizer: PreTrainedTokenizerBase, messages: list[dict]) -> list[int]:
    """The tokens the template closes the answer ``messages[-1]`` with (:func:`closing_ids`), through the
    end-of-sequence token as for an answer re-encoded from its text (ChatML: ``<|im_end|>``)."""
    return _through_eos(tokenizer, closing_ids(tokenizer, messages))


def _through_eos(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[int]:
    eos = tokenizer.eos_token_id
    return ids[: ids.index(eos) + 1] if eos in ids else ids


def load_completions(
    tokenizer: PreTrainedTokenizerBase, path: str | Path | None, num_prompts: int, max_prompt_tokens: int,
    digests: frozenset[str] = frozenset(),
) -> list[dict[str, list[int]]]:
    """``{"input_ids", "completion_ids"}`` of the first ``num_prompts`` usable records of ``path``.

    Each record of the JSONL file (``trainers/regenerate_sharegpt.py`` output) contributes its
    first user turn (after any system turns; chat template, generation prompt) and the assistant's answer to it
    (:func:`completion_ids`). Prompts longer than ``max_prompt_tokens`` are skipped, and so are conversations
    a user turn of which is an evaluation question
    (``digests``: :func:`~hf_adaptive_spec.training_data.eval_question_digests`).
    Records with no answer (only the user turn, or another user turn next) and records whose prompt the chat
    template renders otherwise inside the conversation are skipped, with one warning per reason that counts them and
    names the first.
    """
    if not path:
        raise ValueError("rollout=replay needs --completions_path: a JSONL file of target-answered conversations.")
    records, unanswered, unaligned = [], [], []
    for conversation in read_conversation_records(path):
        if leaks(conversation, digests):
            continue
        prompt = prompt_ids(tokenizer, conversation.prompt_messages)
        if len(prompt) > max_prompt_tokens:
            continue
        if conversation.first_answer is None:
            unanswered.append(conversation.id)
            continue
        messages = [*conversation.prompt_messages, conversation.first_answer]
        try:
            records.append({"input_ids": prompt, "completion_ids": completion_ids(tokenizer, messages, prompt)})
        except UnalignedRecordError:
            unaligned.append(conversation.id)
        except ValueError as error:
            raise ValueError(f"{path}, record {conversation.id!r}: {error}") from error
        if len(records) == num_prompts:
            break
    _warn_skipped(path, unanswered, "with no answer to their first user turn, so there is nothing to replay")
    _warn_skipped(path, unaligned, "whose prompt the chat template renders differently inside the conversation, so "
                  "where the answer starts is unknown")
    if len(records) < num_prompts:
        count = len(unanswered) + len(unaligned)
        skipped = f" ({count} skipped, see the warnings above)" if count else ""
        raise ValueError(
            f"{path} holds {len(records)} usable conversations{skipped}; {num_prompts} were asked for. Regenerate more "
            "with trainers/regenerate_sharegpt.py, or ask for fewer prompts."
        )
    return records


def _warn_skipped(path: str | Path, record_ids: list[str], reason: str) -> None:
    if record_ids:
        logger.warning(
            f"{path}: skipped {len(record_ids)} record{'s' if len(record_ids) > 1 else ''} (the first: id "
            f"{record_ids[0]!r}) {reason}."
        )
