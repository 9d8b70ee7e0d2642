"""The prompts a drafter has trained on, over all its stages: ``trained_prompts.json`` in every folder the trainer
saves, so that a later stage leaves out of its held-out curve the conversations an earlier stage trained on, whatever
data the later stage reads.

A prompt is kept as a digest of its tokens (the chat template's tokens before the first answer token), not as text:
the file is small (about 20 bytes a prompt) and holds no conversation. A drafter saved without the file (every stage
before session 85) has an unknown lineage: the stages after it record theirs as incomplete.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ...core.files import write_text_atomically

logger = logging.getLogger(__name__)

#: the file, in a drafter folder, of the digests of every prompt its stages trained on
TRAINED_PROMPTS_FILE = "trained_prompts.json"
#: how a digest is computed, written in the file and checked when it is read
DIGEST_RULE = "sha256 of the opening prompt's token ids as comma-separated decimals, first 16 hex digits"


def opening_prompt(sample: dict[str, list[int]]) -> tuple[int, ...]:
    """A tokenised conversation's tokens before its first answer token."""
    mask = sample["loss_mask"]
    return tuple(sample["input_ids"][: mask.index(1) if 1 in mask else len(mask)])


def prompt_digest(sample: dict[str, list[int]]) -> str:
    """The digest of ``sample``'s opening prompt (:data:`DIGEST_RULE`)."""
    text = ",".join(map(str, opening_prompt(sample)))
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def prompt_digests(samples: Iterable[dict[str, list[int]]]) -> frozenset[str]:
    return frozenset(prompt_digest(sample) for sample in samples)


@dataclass(frozen=True)
class Lineage:
    """The prompt digests a drafter's stages trained on. ``complete`` is False when a stage before them is unknown
    (it was saved without :data:`TRAINED_PROMPTS_FILE`): the digests then hold only the stages after it."""

    prompts: frozenset[str] = frozenset()
    complete: bool = True

    def extended(self, digests: Iterable[str]) -> Lineage:
        """This lineage with a stage that trained on ``digests`` added."""
        return Lineage(self.prompts | frozenset(digests), self.complete)


def read_lineage(folder: str | Path) -> Lineage | None:
    """The lineage ``folder``'s drafter was trained on, or None when it holds no :data:`TRAINED_PROMPTS_FILE` (a
    drafter saved before the file existed, by another trainer, or a Hub id: its data is unknown)."""
    path = Path(folder) / TRAINED_PROMPTS_FILE
    if not path.is_file():
        return None
    stored = json.loads(path.read_text(encoding="utf-8"))
    if (not isinstance(stored, dict) or stored.get("digest") != DIGEST_RULE
            or not isinstance(stored.get("prompts"), list) or not isinstance(stored.get("complete"), bool)):
        raise ValueError(
            f"{path} is not a trained-prompts file of this version (it needs 'digest': {DIGEST_RULE!r}, a 'prompts' "
            "list and 'complete': true or false): remove it to treat the drafter's earlier data as unknown."
        )
    return Lineage(frozenset(stored["prompts"]), stored["complete"])


def write_lineage(folder: str | Path, lineage: Lineage) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    stored = {"digest": DIGEST_RULE, "complete": lineage.complete, "prompts": sorted(lineage.prompts)}
    write_text_atomically(Path(folder) / TRAINED_PROMPTS_FILE, json.dumps(stored, indent=0) + "\n")


def lineage_before(init_from: str | None) -> Lineage:
    """What the stages before this one trained on: ``init_from``'s lineage (an empty, complete one for a new drafter).
    A drafter without the file, or whose own lineage is incomplete, gives an incomplete one, said in a warning: the
    held-out curve is then checked against the stages known alone, and every later stage says so too."""
    if not init_from:
        return Lineage()
    before = read_lineage(init_from)
    if before is None or not before.complete:
        logger.warning(
            "%s: the data of %s is unknown (%s): this drafter's trained_prompts.json records its lineage as "
            "incomplete, and a held-out curve leaves out only the conversations that open with a prompt of the stages "
            "known. Keep the held-out file out of every stage's data (regenerate_sharegpt.py --exclude_ids_from).",
            init_from,
            "the stages before this one" if before is None else "some stages before this one",
            f"no {TRAINED_PROMPTS_FILE}" if before is None else "its lineage names an unknown stage",
        )
    return before or Lineage(complete=False)
