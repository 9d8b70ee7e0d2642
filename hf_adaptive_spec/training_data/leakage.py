"""Keep evaluation prompts out of the training data.

A conversation is dropped when any of its user turns, or any paragraph of one (ShareGPT's consecutive
user turns are joined by a blank line; a question may be pasted into a longer request), is an evaluation
question up to Unicode form, case, punctuation and whitespace: texts are compared by a digest of
:func:`normalize_question`. The digests of the shared evaluation questions ship with the package
(``eval_questions.sha256``), so the filter works where the shared data folder is absent; regenerate them
after the question files change, or the normalisation, with ``write_eval_question_digests(Path("../shared/data"))``.
Not caught: a question reworded, or embedded inside a paragraph of other text; ``examples/near_duplicate_audit.py``
lists the training turns that hold most of a question's word n-grams, to be read (the committed data: none found,
artifacts/README.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
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


def normalize_question(text: str) -> str:
    """``text`` as the filter compares it: Unicode NFKC, case-folded, punctuation removed, whitespace collapsed
    (a question copied with curly quotes, in lower case or without its question mark is the same question)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return normalize_whitespace("".join(" " if unicodedata.category(c).startswith("P") else c for c in folded))


def load_eval_questions(paths: Iterable[Path] | None = None) -> set[str]:
    """Whitespace-normalised question turns of JSONL evaluation files.

    Every string in a record's ``turns`` list counts (MT-bench, Spec-Bench, EAGLE sets), and
    its ``question`` field (GSM8K). ``paths`` defaults to :func:`eval_question_files`.
    """
    questions: set[str] = set()
    for path in eval_question_files() if paths is None else paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                if not line.strip():
                    continue
                record = json.loads(line)
                texts = list(record.get("turns", []))
                if "question" in record:
                    texts.append(record["question"])
                questions.update(normalize_whitespace(text) for text in texts if isinstance(text, str))
    return questions


def question_digest(text: str) -> str:
    """The first 16 hex digits of the SHA-256 of :func:`normalize_question`'s text."""
    return hashlib.sha256(normalize_question(text).encode("utf-8")).hexdigest()[:16]


def eval_question_digests(data_dir: str | Path | None = None) -> frozenset[str]:
    """Digests of every evaluation question: from ``data_dir``'s question files, else from the shared
    data folder's, else the copy packaged with hf-adaptive-spec (made from the same files)."""
    data_dir = Path(data_dir) if data_dir else default_eval_data_dir()
    if data_dir is not None:
        return frozenset(question_digest(question) for question in load_eval_questions(eval_question_files(data_dir)))
    logger.info("no shared data folder: using the evaluation question digests packaged in %s", PACKAGED_DIGESTS)
    return frozenset(PACKAGED_DIGESTS.read_text(encoding="ascii").split())


def write_eval_question_digests(data_dir: Path, path: Path = PACKAGED_DIGESTS) -> int:
    """Write the sorted digests of ``data_dir``'s evaluation questions to ``path``; return how many."""
    digests = sorted(eval_question_digests(data_dir))
    path.write_text("".join(digest + "\n" for digest in digests), encoding="ascii")
    return len(digests)


def _parts(content: str) -> list[str]:
    """A turn's paragraphs (split at a blank line, whitespace or ``\\r`` in it included) and its lines: a question
    pasted after an instruction, on a line or a paragraph of its own."""
    return [*re.split(r"\n\s*\n", content), *content.splitlines()]


def leaks(conversation: Conversation, digests: frozenset[str]) -> bool:
    """Whether a user turn of ``conversation``, or a paragraph or a line of one, is an evaluation question."""
    for message in conversation.messages:
        if message["role"] != "user":
            continue
        texts = [message["content"], *(part for part in _parts(message["content"]) if part.strip())]
        if any(question_digest(text) in digests for text in texts):
            return True
    return False


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
