"""Keep evaluation prompts out of the training data.

A conversation is dropped when any of its user turns is an evaluation question up to Unicode form, case,
punctuation, whitespace and invisible format characters (zero-width space, BOM, soft hyphen: Unicode category Cf), or
holds one on lines of its own: a line, a paragraph, or a run of consecutive lines (a several-line question pasted
after or before other text, on its own lines; ShareGPT's consecutive user turns are joined by a blank line). Texts
are compared by a digest of :func:`normalize_question`; a several-line question is also indexed by the digest of its
first line and its line count (``<digest>:<lines>``), so a turn's runs of lines are checked only where such a first
line occurs. The digests of the shared evaluation questions ship with the package (``eval_questions.sha256``), so the
filter works where the shared data folder is absent; regenerate them after the question files change, or the
normalisation, with ``write_eval_question_digests(Path("../shared/data"))``.
Not caught: a question reworded, or embedded inside a line of other text (its first line after other words on the
same line); ``examples/near_duplicate_audit.py`` lists the training turns that hold most of a question's word n-grams,
to be read (the committed data: none found, artifacts/README.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

from .sharegpt import Conversation

logger = logging.getLogger(__name__)

# Question files under the shared evaluation data folder (see its README.md).
EVAL_QUESTION_GLOBS = (
    "mt_bench/question.jsonl",
    "spec_bench/question.jsonl",
    "eagle_eval/*.jsonl",
    "gsm8k/test.jsonl",
)

_REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGED_DIGESTS = Path(__file__).with_name("eval_questions.sha256")


def default_eval_data_dir() -> Path | None:
    """The shared evaluation data folder: ``<repo>/shared/data`` or ``<repo>/../shared/data``, if present."""
    for candidate in (_REPO_ROOT / "shared" / "data", _REPO_ROOT.parent / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    return None


def eval_question_files(data_dir: Path | None = None) -> list[Path]:
    """The question files matching :data:`EVAL_QUESTION_GLOBS` under ``data_dir`` (default: the shared folder)."""
    data_dir = data_dir or default_eval_data_dir()
    if data_dir is None:
        raise FileNotFoundError("no evaluation data folder found: pass the question files explicitly")
    found = {pattern: set(Path(data_dir).glob(pattern)) for pattern in EVAL_QUESTION_GLOBS}
    files = sorted(set().union(*found.values()))
    if not files:
        raise FileNotFoundError(f"no evaluation question files under {data_dir}")
    missing = [pattern for pattern, paths in found.items() if not paths]
    if missing:  # their questions are not kept out: a folder holding only some sets filtered for those alone
        logger.warning(
            "no %s under %s: those evaluation questions are not kept out of the training data. Give the folder every "
            "set, or leave the folder unset to use the packaged digests of all of them.",
            " or ".join(missing), data_dir,
        )
    return files


def normalize_whitespace(text: str) -> str:
    """Collapse every run of whitespace to one space and strip the ends."""
    return " ".join(text.split())


def _dropped_or_space(character: str) -> str:
    category = unicodedata.category(character)
    return " " if category.startswith("P") else "" if category == "Cf" else character


def normalize_question(text: str) -> str:
    """``text`` as the filter compares it: Unicode NFKC, case-folded, punctuation removed, invisible format characters
    (category Cf: zero-width space, BOM, soft hyphen, ...) dropped, whitespace collapsed (a question copied with curly
    quotes, in lower case or without its question mark is the same question)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return normalize_whitespace("".join(map(_dropped_or_space, folded)))


def _question_texts(paths: Iterable[Path]) -> set[str]:
    """The question texts of JSONL evaluation files, as written (see :func:`load_eval_questions`)."""
    questions: set[str] = set()
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                if not line.strip():
                    continue
                record = json.loads(line)
                texts = list(record.get("turns", []))
                if "question" in record:
                    texts.append(record["question"])
                questions.update(text for text in texts if isinstance(text, str))
    return questions


def load_eval_questions(paths: Iterable[Path] | None = None) -> set[str]:
    """Whitespace-normalised question turns of JSONL evaluation files.

    Every string in a record's ``turns`` list counts (MT-bench, Spec-Bench, EAGLE sets), and
    its ``question`` field (GSM8K). ``paths`` defaults to :func:`eval_question_files`.
    """
    return {normalize_whitespace(text) for text in _question_texts(eval_question_files() if paths is None else paths)}


def _digest(normalized: str) -> str:
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:16]


def question_digest(text: str) -> str:
    """The first 16 hex digits of the SHA-256 of :func:`normalize_question`'s text."""
    return _digest(normalize_question(text))


def _normalized_lines(text: str) -> list[str]:
    """The :func:`normalize_question` form of each line of ``text`` that keeps any text."""
    return [line for line in map(normalize_question, text.splitlines()) if line]


def question_digests(text: str) -> set[str]:
    """The digests the filter knows ``text`` by: :func:`question_digest`, and for a question of several lines the
    opening entry ``<digest of its first line>:<its line count>`` (lines that keep any text once normalised)."""
    lines = _normalized_lines(text)
    return {question_digest(text), *([f"{_digest(lines[0])}:{len(lines)}"] if len(lines) > 1 else [])}


def eval_question_digests(data_dir: str | Path | None = None) -> frozenset[str]:
    """Digests of every evaluation question (:func:`question_digests`): from ``data_dir``'s question files, else from
    the shared data folder's, else the copy packaged with hf-adaptive-spec (made from the same files)."""
    data_dir = Path(data_dir) if data_dir else default_eval_data_dir()
    if data_dir is not None:
        texts = _question_texts(eval_question_files(data_dir))
        return frozenset().union(*map(question_digests, texts))
    logger.info("no shared data folder: using the evaluation question digests packaged in %s", PACKAGED_DIGESTS)
    return frozenset(PACKAGED_DIGESTS.read_text(encoding="ascii").split())


def write_eval_question_digests(data_dir: Path, path: Path = PACKAGED_DIGESTS) -> int:
    """Write the sorted digests of ``data_dir``'s evaluation questions to ``path`` (:func:`question_digests`: a
    several-line question has two); return how many digests."""
    digests = sorted(eval_question_digests(data_dir))
    path.write_text("".join(digest + "\n" for digest in digests), encoding="ascii")
    return len(digests)


@functools.lru_cache(maxsize=4)
def _openings(digests: frozenset[str]) -> dict[str, tuple[int, ...]]:
    """The digests' opening entries: a several-line question's first-line digest -> the line counts it opens."""
    openings: dict[str, set[int]] = {}
    for entry in digests:
        first, _, count = entry.partition(":")
        if count:
            openings.setdefault(first, set()).add(int(count))
    return {first: tuple(sorted(counts)) for first, counts in openings.items()}


def _turn_leaks(content: str, digests: frozenset[str], openings: dict[str, tuple[int, ...]]) -> bool:
    """Whether the turn, a paragraph of it (split at a blank line), a line, or a run of consecutive lines that a
    several-line question's first line opens is an evaluation question."""
    lines, paragraphs, paragraph = [], [], []
    for raw in content.splitlines():
        if not raw.strip():
            paragraphs.append(paragraph)
            paragraph = []
            continue
        line = normalize_question(raw)
        if line:
            lines.append(line)
            paragraph.append(line)
    paragraphs.append(paragraph)
    whole = [" ".join(lines), *(" ".join(p) for p in paragraphs if len(p) > 1)]
    if any(_digest(text) in digests for text in whole):
        return True
    for index, line in enumerate(lines):
        first = _digest(line)
        if first in digests:
            return True
        for count in openings.get(first, ()):
            if index + count <= len(lines) and _digest(" ".join(lines[index : index + count])) in digests:
                return True
    return False


def leaks(conversation: Conversation, digests: frozenset[str]) -> bool:
    """Whether a user turn of ``conversation``, or a paragraph, a line or a run of lines of one, is an evaluation
    question (``digests``: :func:`eval_question_digests`)."""
    openings = _openings(frozenset(digests))
    return any(
        _turn_leaks(message["content"], digests, openings) for message in conversation.messages
        if message["role"] == "user"
    )


def drop_leaked(conversations: Iterable[Conversation], digests: frozenset[str]) -> Iterator[Conversation]:
    """Yield the conversations none of whose user turns is an evaluation question (:func:`leaks`,
    :func:`eval_question_digests`)."""
    dropped = 0
    for conversation in conversations:
        if leaks(conversation, digests):
            dropped += 1
        else:
            yield conversation
    logger.info("%d conversations dropped: a user turn of each is an evaluation question", dropped)
