"""Re-answer conversation prompts with the target model, so a drafter learns the target's own outputs.

This is the EAGLE-3 data recipe: the user turns are kept, and every assistant turn is
replaced by what the target generates with its chat template, given its own earlier
answers as context. Each answer keeps its text (``content``) and the ids the target generated
(``token_ids``, without the end-of-sequence token): decoding and re-encoding the text does not give
them back for every token, and training uses the ids (:func:`answer_token_ids`). A later turn's
prompt renders the earlier answers from their text, as a chat server would.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..core.sequences import end_of_sequence_ids
from ..core.settings import sampling_kwargs
from .jsonl_output import append_records, drop_partial_last_line, writing_alone, written_ids
from .output_settings import check_output_settings, regeneration_settings, write_output_settings
from .sharegpt import Conversation, Message

logger = logging.getLogger(__name__)


@dataclass
class RegenerationConfig:
    """How the target re-answers the prompts.

    Args:
        max_new_tokens: most tokens generated per assistant turn.
        batch_size: conversations generated together in one left-padded batch.
        temperature: 0 decodes greedily; above 0 samples from the whole ``softmax(logits / temperature)``
            (every truncating warper off, whatever the model's generation_config sets, as the benchmark samples:
            :func:`~hf_adaptive_spec.core.settings.sampling_kwargs`).
        max_turns: user turns re-answered per conversation; turn k is answered with the
            model's own answers to turns 1..k-1 in context.
        max_prompt_tokens: a prompt longer than this (chat template included) is not
            answered: the conversation is skipped at its first turn and ends before a later one.
    """

    max_new_tokens: int = field(default=256, metadata={"help": "Most tokens generated per assistant turn."})
    batch_size: int = field(default=16, metadata={"help": "Conversations per left-padded generation batch."})
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature; 0 means greedy decoding."})
    max_turns: int = field(default=1, metadata={"help": "User turns re-answered per conversation."})
    max_prompt_tokens: int = field(
        default=512, metadata={"help": "Prompts longer than this many tokens are not answered."}
    )

    def __post_init__(self) -> None:
        # max_turns=0 wrote every conversation empty (and marked it done); batch_size=0 failed inside range();
        # a negative temperature decoded greedily without a word
        for name in ("max_new_tokens", "batch_size", "max_turns", "max_prompt_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"RegenerationConfig.{name} must be >= 1, got {getattr(self, name)}.")
        if not self.temperature >= 0:
            raise ValueError(
                f"RegenerationConfig.temperature must be 0 (greedy) or positive, got {self.temperature}."
            )


@dataclass
class RegenerationStats:
    """What one :func:`regenerate` call did."""

    written: int = 0
    already_written: int = 0
    too_long: int = 0
    new_tokens: int = 0
    seconds: float = 0.0
    #: answers cut at ``max_new_tokens`` (written with ``"truncated": true``: they have no end)
    truncated: int = 0

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens per second of generation time."""
        return self.new_tokens / self.seconds if self.seconds else 0.0


@dataclass
class _Dialogue:
    """A conversation being re-answered: the messages of each turn it asks (a user turn, with the system turns
    before it) and the messages regenerated so far."""

    id: str
    asked: list[list[Message]]
    messages: list[Message] = field(default_factory=list)


def _asked_turns(conversation: Conversation) -> list[list[Message]]:
    """Each user turn of ``conversation`` with the system turns just before it (the first: its
    :attr:`~Conversation.prompt_messages`); its answers are left out, to be regenerated."""
    asked, pending = [], []
    for message in conversation.messages:
        if message["role"] == "system":
            pending.append(Message(role="system", content=message["content"]))
        elif message["role"] == "user":
            asked.append([*pending, Message(role="user", content=message["content"])])
            pending = []
    return asked


def prompt_ids(tokenizer: PreTrainedTokenizerBase, messages: list[Message]) -> list[int]:
    """Token ids of ``messages`` under the chat template, ending with the assistant generation prompt."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def first_prompt_length(tokenizer: PreTrainedTokenizerBase, conversation: Conversation) -> int:
    """Tokens in the prompt that asks for the first assistant turn of ``conversation``."""
    return len(prompt_ids(tokenizer, conversation.prompt_messages))


def left_pad(prompts: list[list[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both ``[len(prompts), longest]``, padded on the left."""
    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        attention_mask[row, width - len(prompt) :] = 1
    return input_ids, attention_mask


@torch.inference_mode()
def generate_reply_ids(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[list[int]],
    config: RegenerationConfig,
) -> tuple[list[list[int]], int, list[bool]]:
    """Generate one reply per prompt in a single left-padded batch.

    Returns the token ids of each reply (up to its end-of-sequence token, which is left out; all of them when
    ``max_new_tokens`` cut the reply), the number of generated tokens (each reply counted up to and including its
    end-of-sequence token) and, per reply, whether ``max_new_tokens`` cut it before any end-of-sequence token.
    """
    eos_ids = list(end_of_sequence_ids(model, tokenizer))
    if not eos_ids and tokenizer.pad_token_id is None:
        raise ValueError(
            "the target has no end-of-sequence token (model.generation_config.eos_token_id and tokenizer.eos_token are "
            "unset) and no pad token: answers would never end and batches cannot be padded. Set tokenizer.eos_token "
            "(the token the chat template ends a turn with, e.g. tokenizer.eos_token = '<|im_end|>'), or "
            "tokenizer.pad_token and model.generation_config.eos_token_id."
        )
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    input_ids, attention_mask = left_pad(prompts, pad_id)
    output = model.generate(
        input_ids=input_ids.to(model.device),
        attention_mask=attention_mask.to(model.device),
        max_new_tokens=config.max_new_tokens,
        pad_token_id=pad_id,
        eos_token_id=eos_ids,
        **sampling_kwargs(config.temperature),
    )
    replies, new_tokens, truncated = [], 0, []
    for row in output[:, input_ids.shape[1] :].tolist():
        end = next((index for index, token in enumerate(row) if token in eos_ids), None)
        new_tokens += len(row) if end is None else end + 1
        replies.append(row[:end])
        truncated.append(end is None)
    return replies, new_tokens, truncated


def answer_token_ids(tokenizer: PreTrainedTokenizerBase, message: Message) -> list[int] | None:
    """The ``token_ids`` regeneration stored in an assistant ``message`` (the ids the target generated), or None
    when it has none (files regenerated before the ids were kept: their answers are trained from the text).

    Raises:
        ValueError: the ids do not decode to the message's text with ``tokenizer``: another tokenizer wrote them,
            and they would train on garbage.
    """
    token_ids = message.get("token_ids")
    if token_ids is None:
        return None
    outside = [t for t in token_ids if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < len(tokenizer)]
    if outside:  # the tokenizer's decode drops unknown ids silently, so the check below would pass
        raise ValueError(
            f"the answer starting {message['content'][:60]!r} has token_ids {outside[:5]} that are not ids of this "
            f"tokenizer (0..{len(tokenizer) - 1}): the file was regenerated with another tokenizer or edited. "
            "Regenerate it with this target, or drop the token_ids field to train on the text."
        )
    if tokenizer.decode(token_ids, skip_special_tokens=True) != message["content"]:
        raise ValueError(
            f"the answer starting {message['content'][:60]!r} has token_ids that do not decode to its content with "
            "this tokenizer: the file was regenerated with another tokenizer. Regenerate it with this target, or "
            "drop the token_ids field to train on the text."
        )
    return list(token_ids)


def closing_ids(tokenizer: PreTrainedTokenizerBase, messages: list[Message]) -> list[int]:
    """The tokens the chat template closes the last (assistant) message of ``messages`` with: its end marker
    (ChatML: ``<|im_end|>``, ``\\n``), which a drafter trained on the answer's ``token_ids`` learns after them.

    Raises:
        ValueError: the template does not render the message left open as a token prefix of it closed.
    """
    rendered = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False)
    return list(rendered[len(without_end_marker(tokenizer, messages, rendered)) :])


def without_end_marker(tokenizer: PreTrainedTokenizerBase, messages: list[Message], rendered: list[int]) -> list[int]:
    """The rendering of ``messages`` with its last (assistant) message left open: ``rendered`` (their closed
    rendering) without its end marker.

    Raises:
        ValueError: the open rendering is not a token prefix of ``rendered``.
    """
    open_ended = tokenizer.apply_chat_template(messages, tokenize=True, continue_final_message=True, return_dict=False)
    if list(rendered[: len(open_ended)]) != list(open_ended):
        raise ValueError("The chat template does not render an open final message as a prefix of the closed one.")
    return list(open_ended)


def _regenerate_batch(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dialogues: list[_Dialogue],
    config: RegenerationConfig,
) -> tuple[int, int]:
    """Answer the dialogues' user turns one turn at a time; returns the generated token count and the number of
    answers ``max_new_tokens`` cut (marked ``"truncated": true``: training must not teach them an end)."""
    new_tokens = cut = 0
    active = dialogues
    for turn in range(config.max_turns):
        answering, histories, prompts = [], [], []
        for dialogue in active:
            if turn >= len(dialogue.asked):
                continue
            history = [*dialogue.messages, *dialogue.asked[turn]]
            ids = prompt_ids(tokenizer, history)
            if len(ids) > config.max_prompt_tokens:
                continue
            answering.append(dialogue)
            histories.append(history)
            prompts.append(ids)
        if not answering:
            break
        replies, count, truncated = generate_reply_ids(model, tokenizer, prompts, config)
        new_tokens, cut = new_tokens + count, cut + sum(truncated)
        for dialogue, history, reply, is_cut in zip(answering, histories, replies, truncated):
            text = tokenizer.decode(reply, skip_special_tokens=True)
            answer = Message(role="assistant", content=text, token_ids=reply, **({"truncated": True} if is_cut else {}))
            dialogue.messages = [*history, answer]
        active = answering
    return new_tokens, cut


def batch_seed(seed: int, ids: list[str]) -> int:
    """The sampling seed of the batch of conversations ``ids``: a digest of ``seed`` and the ids, so a batch samples the
    same answers in a resumed run as in an uninterrupted one, whatever was generated before it."""
    digest = hashlib.sha256(json.dumps([seed, ids]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


@contextlib.contextmanager
def seeded_sampling(device: torch.device, seed: int) -> Iterator[None]:
    """torch's generators (the CPU's and ``device``'s, which ``generate`` samples with) seeded with ``seed`` inside
    the block, and given back their states after it."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


def _unwritten(
    conversations: Iterable[Conversation], done: set[str], stats: RegenerationStats
) -> Iterator[Conversation]:
    """The conversations whose id is not in ``done`` (those that are count as ``stats.already_written``).

    Raises:
        ValueError: an id comes twice (its record would be written twice, and a resumed run could not tell them apart).
    """
    seen: set[str] = set()
    for conversation in conversations:
        if conversation.id in seen:
            raise ValueError(
                f"conversation id {conversation.id!r} comes twice in the input: its record would be written twice. "
                "Give every conversation its own id (iter_sharegpt skips repeated ones) or drop the repeats."
            )
        seen.add(conversation.id)
        if conversation.id in done:
            stats.already_written += 1
        else:
            yield conversation


def regenerate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    conversations: Iterable[Conversation],
    output_path: Path,
    config: RegenerationConfig,
    seed: int = 0,
    settings: dict[str, object] | None = None,
) -> RegenerationStats:
    """Re-answer ``conversations`` with ``model`` and append ``{"id", "conversation"}`` lines to ``output_path``.

    Conversations whose id is already in the file are skipped, so a stopped run resumes
    where it left off. Prompts are sorted by length and batched to cut padding; each
    batch is written (and logged with its tokens/s) as soon as it is done. A conversation's system turns stay in the
    prompts its answers are generated from (and count in ``config.max_prompt_tokens``).

    The settings the answers are made with (:func:`regeneration_settings`: the model's name, dtype and device, the
    seed and ``config``; with ``settings``, the caller's, such as where the conversations came from, which override
    them) are kept in ``<output>.settings.json`` with the first records, and adding to a file written with other ones
    is refused (:func:`check_output_settings`).

    Sampling (``config.temperature > 0``) seeds each batch from ``seed`` and the batch's ids (:func:`batch_seed`),
    not from torch's global generator: a run resumed after its last whole batch (the done conversations are a
    prefix of the sorted queue, so the remaining batches are the same) writes the answers an uninterrupted run writes
    on the same device, dtype and batch size. In bfloat16 (or float16) an answer depends on the batch it is generated
    in (padding and batch shape change its rounding), so a resume with another batch size or device is refused there;
    in float32 the answers are the target's one-at-a-time answers whatever the batch. A batch cut in the middle of its
    write regroups the conversations after it, which then sample other (equally valid) answers. One process writes
    ``output_path`` at a time (another is refused).
    """
    output_path = Path(output_path)
    settings = {
        **regeneration_settings(config, seed, model.name_or_path, str(model.dtype).removeprefix("torch."),
                                model.device.type),
        **(settings or {}),
    }
    with writing_alone(output_path):
        return _regenerate(model, tokenizer, conversations, output_path, config, seed, settings)


def _regenerate(model, tokenizer, conversations, output_path: Path, config: RegenerationConfig, seed: int, settings):
    drop_partial_last_line(output_path)
    unrecorded = check_output_settings(output_path, settings)
    done = written_ids(output_path)
    if unrecorded and done:
        write_output_settings(output_path, settings)
        unrecorded = False
    stats = RegenerationStats()
    queue: list[tuple[int, _Dialogue]] = []
    for conversation in _unwritten(conversations, done, stats):
        length = first_prompt_length(tokenizer, conversation)
        if length > config.max_prompt_tokens:
            stats.too_long += 1
            continue
        queue.append((length, _Dialogue(conversation.id, _asked_turns(conversation)[: config.max_turns])))
    queue.sort(key=lambda item: item[0])
    dialogues = [dialogue for _, dialogue in queue]
    batches = [dialogues[i : i + config.batch_size] for i in range(0, len(dialogues), config.batch_size)]
    logger.info(
        "regenerating %d conversations in %d batches (%d already in %s, %d prompts over %d tokens skipped)",
        len(queue), len(batches), stats.already_written, output_path, stats.too_long, config.max_prompt_tokens,
    )
    start = time.perf_counter()
    for index, batch in enumerate(batches, start=1):
        batch_start = time.perf_counter()
        with seeded_sampling(model.device, batch_seed(seed, [dialogue.id for dialogue in batch])):  # greedy: no draw
            batch_tokens, cut = _regenerate_batch(model, tokenizer, batch, config)
        stats.truncated += cut
        if unrecorded:  # with the first records: a run that fails before writing leaves no settings behind
            write_output_settings(output_path, settings)
            unrecorded = False
        append_records(output_path, [{"id": dialogue.id, "conversation": dialogue.messages} for dialogue in batch])
        batch_seconds = time.perf_counter() - batch_start
        stats.written += len(batch)
        stats.new_tokens += batch_tokens
        stats.seconds = time.perf_counter() - start
        remaining = datetime.timedelta(seconds=round(stats.seconds / index * (len(batches) - index)))
        logger.info(
            "batch %d/%d: %d new tokens in %.1fs (%.1f tokens/s); %d written, %.1f tokens/s overall, about %s left",
            index, len(batches), batch_tokens, batch_seconds, batch_tokens / batch_seconds,
            stats.written, stats.tokens_per_second, remaining,
        )
    return stats


def copy_conversations(
    conversations: Iterable[Conversation], output_path: Path, settings: dict[str, object] | None = None
) -> RegenerationStats:
    """Append ``conversations`` with their original answers, in :func:`regenerate`'s format.

    EAGLE-1's data recipe: the drafter still learns the target's distribution (training uses the
    target's soft labels at every position); only the text is not the target's own. It costs no
    generation. Conversations already in ``output_path`` are skipped, as in :func:`regenerate`, and the settings
    (``{"answers": "original"}`` and the caller's ``settings``) are kept and checked as there.
    """
    output_path = Path(output_path)
    settings = {"answers": "original", **(settings or {})}
    with writing_alone(output_path):
        drop_partial_last_line(output_path)
        unrecorded = check_output_settings(output_path, settings)
        done = written_ids(output_path)
        stats = RegenerationStats()
        records = [{"id": c.id, "conversation": c.messages} for c in _unwritten(conversations, done, stats)]
        if unrecorded and (done or records):
            write_output_settings(output_path, settings)
        append_records(output_path, records)
    stats.written = len(records)
    return stats
