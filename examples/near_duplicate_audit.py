"""Audit training data for evaluation questions the leakage filter cannot catch: reworded, or embedded in a longer turn.

    python examples/near_duplicate_audit.py artifacts/sharegpt_smollm2_*.jsonl [--threshold 0.5] [--n 4]

The filter (``hf_adaptive_spec.training_data.leakage``) drops a conversation when a user turn, or a paragraph of
one, *is* an evaluation question up to case, punctuation and whitespace. This audit looks for the rest: for every
evaluation question of at least 8 words, the user turns that hold at least ``--threshold`` of its word
``--n``-grams (containment, not similarity, so a question pasted inside a long request counts in full). Each hit is
printed with the question and the turn, to be read: short questions share templates ("Translate German to
English: ...") with unrelated turns. Needs the shared evaluation data folder; reads the repository's JSONL
training files (``{"id", "conversation": [{"role", "content"}, ...]}``).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from hf_adaptive_spec.training_data.leakage import load_eval_questions, normalize_question

MIN_WORDS = 8


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """The word ``n``-grams of ``text`` as the leakage filter normalises it (case, punctuation, whitespace)."""
    words = normalize_question(text).split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


class QuestionIndex:
    """Evaluation questions by their word n-grams, for containment queries."""

    def __init__(self, questions: list[str], n: int):
        self.questions, self.n = questions, n
        self.sizes = [len(word_ngrams(question, n)) for question in questions]
        self.by_ngram: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for index, question in enumerate(questions):
            for ngram in word_ngrams(question, n):
                self.by_ngram[ngram].append(index)

    def contained(self, text: str, threshold: float) -> list[tuple[float, int]]:
        """``(share, question index)`` of each question at least ``threshold`` of whose n-grams ``text`` holds."""
        shared: dict[int, int] = defaultdict(int)
        for ngram in word_ngrams(text, self.n):
            for index in self.by_ngram.get(ngram, ()):
                shared[index] += 1
        shares = ((count / self.sizes[index], index) for index, count in shared.items())
        return sorted((share, index) for share, index in shares if share >= threshold)


def user_turns(path: Path) -> Iterator[tuple[str, str]]:
    """``(conversation id, text)`` of every user turn of a JSONL training file."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            for message in record["conversation"]:
                if message["role"] == "user":
                    yield record["id"], message["content"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="JSONL training files")
    parser.add_argument("--threshold", type=float, default=0.5, help="share of a question's n-grams a turn must hold")
    parser.add_argument("--n", type=int, default=4, help="words per n-gram")
    args = parser.parse_args(argv)
    if not 0 <= args.threshold <= 1:  # e.g. 50 for 50%: no turn can hold more than all of a question
        parser.error(f"--threshold {args.threshold:g} is a share of a question's n-grams: give it in [0, 1] "
                     "(0.5: half)")
    if not 1 <= args.n <= MIN_WORDS:  # 0 words: every turn held every question; past MIN_WORDS short ones had none
        parser.error(f"--n {args.n}: give words per n-gram from 1 to {MIN_WORDS} (the shortest question audited)")
    questions = sorted(q for q in load_eval_questions() if len(normalize_question(q).split()) >= MIN_WORDS)
    index = QuestionIndex(questions, args.n)
    turns = hits = 0
    for path in args.files:
        for conversation_id, text in user_turns(path):
            turns += 1
            contained = index.contained(text, args.threshold)
            hits += bool(contained)  # turns, not (turn, question) pairs: one turn may hold several questions
            for share, question in contained:
                print(f"{share:.2f} {path.name} {conversation_id}\n  question: {questions[question][:120]!r}\n"
                      f"  turn:     {text[:120]!r}")
    print(f"{len(questions)} evaluation questions of >= {MIN_WORDS} words, {turns} training user turns in "
          f"{len(args.files)} files: {hits} turns hold >= {args.threshold:.0%} of a question's word {args.n}-grams")


if __name__ == "__main__":
    main()
