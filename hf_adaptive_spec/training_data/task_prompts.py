"""Translation and summarization requests built from ShareGPT's own texts.

ShareGPT's first turns rarely ask for either task (of the 19,064 conversations the shipped drafter
trained on, 0.6% ask for a translation and 2.1% for a summary), while Spec-Bench gives each a sixth of
its prompts, and the drafter's τ is lowest there. These builders turn ShareGPT texts into such requests,
worded as Spec-Bench words its tasks (``Translate German to English: ``, ``Summarize: ``), so that the
target's answers to them can join a drafter's training data:

- :func:`translation_prompts`: one request per German sentence found in ShareGPT's turns;
- :func:`summarization_prompts`: one request per conversation, for its first long English prose turn.

The texts are ShareGPT's, never an evaluation set's; the built prompts still pass through
:func:`~hf_adaptive_spec.training_data.drop_leaked` before they are answered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from .sharegpt import Conversation, Message

TRANSLATION_PREFIX = "Translate German to English: "
SUMMARIZATION_PREFIX = "Summarize: "

GERMAN_WORDS = frozenset(
    ["der", "die", "das", "und", "ist", "nicht", "ich", "zu", "den", "mit", "sich", "des", "auf", "für", "im", "dem",
     "ein", "eine", "einen", "wir", "sie", "es", "von", "wie", "auch", "bei", "oder", "werden", "wird", "aus", "kann",
     "sind", "nach", "noch", "über", "nur", "wenn", "durch", "diese", "dieser", "haben", "hat", "war", "um",
     "zum", "zur"]
)
ENGLISH_WORDS = frozenset(
    ["the", "and", "is", "to", "of", "a", "in", "that", "it", "for", "you", "with", "this", "are", "be", "on", "as",
     "was", "by", "or", "from"]
)

_WORD = re.compile(r"[A-Za-zÄÖÜäöüß]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜ\"„])")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _share(words: list[str], vocabulary: frozenset[str]) -> float:
    return sum(word in vocabulary for word in words) / len(words) if words else 0.0


def looks_german(text: str, min_share: float = 0.12, min_count: int = 1) -> bool:
    """Whether ``text`` reads as German: at least ``min_count`` German function words, ``min_share`` of its
    words, and at least twice its share of English ones."""
    words = _words(text)
    german = sum(word in GERMAN_WORDS for word in words)
    share = german / len(words) if words else 0.0
    return german >= min_count and share >= min_share and share > 2 * _share(words, ENGLISH_WORDS)


def looks_english_prose(text: str, min_share: float = 0.15) -> bool:
    """Whether ``text`` reads as English running text: no code block, mostly letters, enough English function words."""
    if "```" in text or not text.strip():
        return False
    letters = sum(character.isalpha() or character.isspace() for character in text)
    return letters / len(text) >= 0.9 and _share(_words(text), ENGLISH_WORDS) >= min_share


def german_sentences(text: str, min_words: int = 6, max_words: int = 60) -> Iterator[str]:
    """The sentences of ``text``'s lines that have ``min_words`` to ``max_words`` words and read as German,
    with at least two German function words (one, such as "im", also occurs in English chat)."""
    for line in text.splitlines():
        for sentence in _SENTENCE_END.split(line.strip().lstrip("-*#> ").strip()):
            long_enough = min_words <= len(sentence.split()) <= max_words
            if long_enough and looks_german(sentence, min_share=0.08, min_count=2):
                yield sentence


def _request(conversation_id: str, content: str) -> Conversation:
    return Conversation(id=conversation_id, messages=[Message(role="user", content=content)])


def translation_prompts(conversations: Iterable[Conversation]) -> Iterator[Conversation]:
    """``Translate German to English: <sentence>`` for every German sentence of every turn.

    A turn is searched only when it reads as German as a whole; ids are ``<conversation id>:translate:<n>``.
    """
    for conversation in conversations:
        count = 0
        for message in conversation.messages:
            if not looks_german(message["content"]):
                continue
            for sentence in german_sentences(message["content"]):
                yield _request(f"{conversation.id}:translate:{count}", TRANSLATION_PREFIX + sentence)
                count += 1


def summarization_prompts(
    conversations: Iterable[Conversation], min_words: int = 150, max_words: int = 800
) -> Iterator[Conversation]:
    """``Summarize: <text>`` for the first turn of each conversation that is English prose of ``min_words`` to
    ``max_words`` words.

    Ids are ``<conversation id>:summarize``.
    """
    for conversation in conversations:
        for message in conversation.messages:
            text = message["content"].strip()
            if min_words <= len(text.split()) <= max_words and looks_english_prose(text):
                yield _request(f"{conversation.id}:summarize", SUMMARIZATION_PREFIX + text)
                break


TASK_PROMPTS: dict[str, Callable[[Iterable[Conversation]], Iterator[Conversation]]] = {
    "translation": translation_prompts,
    "summarization": summarization_prompts,
}


def task_prompts(task: str, conversations: Iterable[Conversation]) -> Iterator[Conversation]:
    """The requests of ``task`` (a key of :data:`TASK_PROMPTS`) built from ``conversations``."""
    if task not in TASK_PROMPTS:
        raise ValueError(f"Unknown task {task!r}: choose one of {sorted(TASK_PROMPTS)}.")
    return TASK_PROMPTS[task](conversations)
