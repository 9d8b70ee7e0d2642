"""The prompts a drafter has trained on, over all its stages: ``trained_prompts.json`` in every folder the trainer
saves, so that a later stage leaves out of its held-out curve the conversations an earlier stage trained on, whatever
data the later stage reads.

A prompt is kept as a digest of its tokens (the chat template's tokens before the first answer token), not as text:
the file is small (about 20 bytes a prompt) and holds no conversation.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path

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


def read_trained_prompts(folder: str | Path) -> frozenset[str] | None:
    """The digests ``folder``'s drafter was trained on, or None when it holds no :data:`TRAINED_PROMPTS_FILE` (a
    drafter saved before the file existed, or by another trainer: its data is unknown)."""
    path = Path(folder) / TRAINED_PROMPTS_FILE
    if not path.is_file():
        return None
    stored = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(stored, dict) or stored.get("digest") != DIGEST_RULE or not isinstance(stored.get("prompts"),
                                                                                                list):
        raise ValueError(
            f"{path} is not a trained-prompts file of this version (it needs 'digest': {DIGEST_RULE!r} and a "
            "'prompts' list): remove it to treat the drafter's earlier data as unknown."
        )
    return frozenset(stored["prompts"])


def write_trained_prompts(folder: str | Path, digests: Iterable[str]) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    stored = {"digest": DIGEST_RULE, "prompts": sorted(digests)}
    (Path(folder) / TRAINED_PROMPTS_FILE).write_text(json.dumps(stored, indent=0) + "\n", encoding="utf-8")


def prompts_trained_before(init_from: str | None) -> frozenset[str]:
    """The digests the stages before this one trained on: ``init_from``'s file (none for a new drafter). A drafter
    without the file is said to have unknown data, in a warning: its held-out curve is checked against this stage's
    data alone."""
    if not init_from:
        return frozenset()
    before = read_trained_prompts(init_from)
    if before is None:
        logger.warning(
            "%s holds no %s: the data of the stages before this one is unknown, so the held-out curve leaves out only "
            "the conversations that open with a prompt of this stage's data. Keep the held-out file out of every "
            "stage's data (regenerate_sharegpt.py --exclude_ids_from).", init_from, TRAINED_PROMPTS_FILE,
        )
        return frozenset()
    return before
