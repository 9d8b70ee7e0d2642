"""Mark the answers of a regenerated file that ``max_new_tokens`` cut, for files written before
:func:`~hf_adaptive_spec.training_data.regenerate` marked them itself.

Regeneration decodes each answer's token ids to text, so a file keeps no token count. An answer cut
at the cap re-encodes to about ``max_new_tokens`` tokens (decoding and encoding again merge or
split a few: the committed files' cut answers re-encode to 252–294 tokens at a cap of 256, most to
exactly 256); an answer the target ended is usually much shorter. An answer re-encoding to at
least ``max_new_tokens - margin`` tokens is marked ``"truncated": true``. The rule is a length
rule, not the target's own verdict: a finished answer just under the cap is marked too (it then
trains without its end marker), and a cut answer that re-encodes shorter than the margin allows
is missed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from .jsonl_output import append_records, writing_alone

#: tokens under ``max_new_tokens`` a cut answer may re-encode to (see the module docstring)
DEFAULT_MARGIN = 4


@dataclass
class CutAnswers:
    """What :func:`mark_cut_answers` found in one file."""

    answers: int = 0
    already_marked: int = 0
    marked: int = 0


def is_cut(answer: str, tokenizer: PreTrainedTokenizerBase, max_new_tokens: int, margin: int = DEFAULT_MARGIN) -> bool:
    """Whether ``answer`` re-encodes to at least ``max_new_tokens - margin`` tokens."""
    return len(tokenizer.encode(answer, add_special_tokens=False)) >= max_new_tokens - margin


def mark_cut_answers(
    path: str | Path, tokenizer: PreTrainedTokenizerBase, max_new_tokens: int, margin: int = DEFAULT_MARGIN
) -> CutAnswers:
    """Rewrite the JSONL file of ``{"conversation": [...]}`` records at ``path`` with every assistant answer
    :func:`is_cut` marks as ``"truncated": true``; answers already marked stay marked, and answers with
    ``token_ids`` are left as they are (the regeneration that kept the ids marked its cut answers itself).
    Every other field of a record is kept. The file is replaced in one rename, so an interrupted run leaves
    it as it was."""
    if max_new_tokens <= margin:
        raise ValueError(
            f"max_new_tokens={max_new_tokens} must exceed the margin ({margin}): "
            "pass the cap the file was regenerated with."
        )
    path = Path(path)
    if not path.is_file():  # before the lock, which would make an empty file of it
        raise FileNotFoundError(f"{path}: no such file to mark; give a JSONL file regeneration wrote.")
    busy = (f"{path} is being written by another process (a regeneration of it, or another marking, still running): "
            "marking replaces the file, so records appended meanwhile would be lost. Wait for it to end, then mark.")
    with writing_alone(path, busy):  # a regeneration appending meanwhile would write into the file the rename replaces
        return _mark_cut_answers(path, tokenizer, max_new_tokens, margin)


def _mark_cut_answers(path: Path, tokenizer: PreTrainedTokenizerBase, max_new_tokens: int, margin: int) -> CutAnswers:
    found, records = CutAnswers(), []
    for line in path.read_text(encoding="utf-8").split("\n"):  # not splitlines: answers hold U+2028 and the like
        if not line.strip():
            continue
        record = json.loads(line)
        for message in record["conversation"]:
            if message["role"] != "assistant":
                continue
            found.answers += 1
            if message.get("truncated"):
                found.already_marked += 1
            elif "token_ids" in message:
                continue  # the target's own verdict: regeneration marked the answer if it was cut
            elif is_cut(message["content"], tokenizer, max_new_tokens, margin):
                message["truncated"] = True
                found.marked += 1
        records.append(record)
    partial = path.with_name(path.name + ".marking")
    partial.unlink(missing_ok=True)
    append_records(partial, records)  # written as regeneration writes its records
    os.replace(partial, path)
    return found
