"""Stream the elements of a top-level JSON array, tolerating a truncated tail."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any, TextIO

logger = logging.getLogger(__name__)

_NON_WHITESPACE = re.compile(r"\S")
#: the longest token prefix a cut can leave after the position a decoding error names ("fals", "-1.5e+", "\\u00a")
_CUT_TOKEN_CHARS = 8
#: what a token prefix never holds: past it, the text after an error is more JSON, not a cut token
_STRUCTURE = re.compile(r'[\s,:\[\]{}"]')


class _ArrayReader:
    """A growing text window over ``stream`` that ``json.JSONDecoder.raw_decode`` reads from."""

    def __init__(self, stream: TextIO, chunk_size: int) -> None:
        self._stream = stream
        self._chunk_size = chunk_size
        self._decoder = json.JSONDecoder()
        self._buffer = ""
        self._pos = 0
        self._eof = False
        self._dropped = 0  # characters of the stream before the buffer

    @property
    def offset(self) -> int:
        """The stream's character offset of the reading position."""
        return self._dropped + self._pos

    def _read_more(self) -> bool:
        """Append one chunk (dropping the consumed prefix); False at end of stream."""
        if self._eof:
            return False
        chunk = self._stream.read(self._chunk_size)
        if not chunk:
            self._eof = True
            return False
        self._dropped += self._pos
        self._buffer = self._buffer[self._pos :] + chunk
        self._pos = 0
        return True

    def peek(self) -> str | None:
        """Skip whitespace and return the next character without consuming it; None at end."""
        while True:
            match = _NON_WHITESPACE.search(self._buffer, self._pos)
            if match is not None:
                self._pos = match.start()
                return self._buffer[self._pos]
            self._pos = len(self._buffer)
            if not self._read_more():
                return None

    def consume(self) -> None:
        """Step over the character returned by ``peek``."""
        self._pos += 1

    def _cut_by_the_end(self, error: json.JSONDecodeError) -> bool:
        """Whether a decoding error at the end of the stream is the file's cut: a string left open (no quote
        follows anywhere), or nothing after the error but the prefix of one token (a cut literal, number or
        escape); a closing bracket, a comma or more values after it make the element malformed instead."""
        if error.msg.startswith("Unterminated string"):
            return True
        tail = self._buffer[error.pos :].rstrip()
        return len(tail) <= _CUT_TOKEN_CHARS and not _STRUCTURE.search(tail)

    def decode(self) -> tuple[bool, Any]:
        """Decode the next value: ``(True, value)``, or ``(False, None)`` if the stream ends first."""
        if self.peek() is None:
            return False, None
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buffer, self._pos)
            except json.JSONDecodeError as error:
                if self._read_more():
                    continue
                if self._cut_by_the_end(error):
                    return False, None
                raise ValueError(
                    f"{source_name(self._stream)}: malformed JSON array: an element cannot be decoded ({error.msg}) "
                    f"with {len(self._buffer.rstrip()) - error.pos} more characters of the file after the error: a "
                    "truncated file ends inside its last element, so this one is malformed. Repair or remove it."
                ) from error
            if end == len(self._buffer):
                # A value touching the end of the window may continue in the next chunk, and a
                # number touching the end of the stream may have been cut ("12" from "123").
                if self._read_more():
                    continue
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    return False, None
            self._pos = end
            return True, value


def iter_json_array(stream: TextIO, chunk_size: int = 1 << 20) -> Iterator[Any]:
    """Yield the complete elements of the JSON array in ``stream``, reading it chunk by chunk.

    The first element that cannot be decoded before the stream ends (a truncated file) ends
    the iteration; the elements before it are yielded. Raises ``ValueError`` when the text
    is not an array, an element is followed by something other than ``,`` or ``]``, an
    element that is not the file's last cannot be decoded (malformed, not cut), or anything but whitespace follows
    the array's closing ``]`` (naming the stream's file and the offset: two arrays concatenated lose the second).
    """
    reader = _ArrayReader(stream, chunk_size)
    first = reader.peek()
    if first != "[":
        raise ValueError(_not_an_array(stream, first))
    reader.consume()
    if reader.peek() == "]":
        _check_nothing_after(reader, stream)
        return
    count = 0
    while True:
        complete, value = reader.decode()
        if not complete:
            logger.info("JSON array truncated: stopped at an incomplete element after %d elements", count)
            return
        yield value
        count += 1
        separator = reader.peek()
        if separator is None:
            logger.info("JSON array truncated after %d elements", count)
            return
        if separator == "]":
            _check_nothing_after(reader, stream)
            return
        if separator != ",":
            raise ValueError(
                f"{source_name(stream)}: malformed JSON array: expected ',' or ']' after element {count}, found "
                f"{separator!r}"
            )
        reader.consume()


def _check_nothing_after(reader: _ArrayReader, stream: TextIO) -> None:
    """Refuse text after the array's closing ``]`` (at the reading position)."""
    reader.consume()
    found = reader.peek()
    if found is not None:
        raise ValueError(
            f"{source_name(stream)}: text after the JSON array's closing ']', at character offset "
            f"{reader.offset} ({found!r}): the file holds more than one array (files joined with `cat`?) or trailing "
            "text. Merge the arrays into one array (e.g. `jq -s add a.json b.json > merged.json`), or remove the text."
        )


def source_name(stream: TextIO) -> str:
    """The file a stream reads (its ``name``), for messages; "the JSON text" for one without a name."""
    return str(getattr(stream, "name", "the JSON text"))


def _not_an_array(stream: TextIO, first: str | None) -> str:
    """Why the text is not a JSON array, naming what it starts with (JSON Lines: one object per line)."""
    if first is None:
        return f"{source_name(stream)}: expected a JSON array, found an empty file"
    if first == "{":
        return (
            f"{source_name(stream)}: expected a JSON array, found text starting with '{{': one JSON object, or JSON "
            "Lines (one object per line). Give a JSON array of records ([{...}, {...}]); JSON Lines convert with "
            "`jq -s . file.jsonl > file.json`."
        )
    return f"{source_name(stream)}: expected a JSON array ('[' first), found text starting with {first!r}"
