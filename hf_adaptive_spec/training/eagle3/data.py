"""EAGLE-3 training data: chat tokenisation with assistant masks, and the draft vocabulary."""

from __future__ import annotations

import itertools
import logging
import random
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.utils.data import IterableDataset
from transformers import PreTrainedTokenizerBase

from ...training_data import read_conversation_records
from ...training_data.regenerate import answer_token_ids, closing_ids, without_end_marker
from .lineage import prompt_digest

if TYPE_CHECKING:
    from ...drafters.eagle3.modeling import Eagle3DraftModel

logger = logging.getLogger(__name__)

#: below this share of the data's trained tokens in the draft vocabulary a warning is logged: the loss reads only the
#: positions whose token the drafter can draft, so most answer tokens would train nothing
LOW_VOCABULARY_SHARE = 0.5


def read_conversations(path: str | Path, limit: int | None = None) -> Iterator[list[dict]]:
    """Conversations from a JSONL file of ``{"conversation": [{"role", "content"}, ...]}`` records
    (the output of ``trainers/regenerate_sharegpt.py``; its answers may hold ``truncated`` and ``token_ids``)."""
    for count, conversation in enumerate(read_conversation_records(path)):
        if limit is not None and count >= limit:
            return
        yield conversation.messages


def tokenize_conversation(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict], max_length: int
) -> dict[str, list[int]] | None:
    """Chat-template tokens and a mask that is 1 on assistant tokens (their end marker included, except for an
    answer marked ``truncated``: ``max_new_tokens`` cut it, so the target never ended it there).

    The template is applied to growing prefixes of the conversation, so the mask is exact for
    any template whose renderings of a conversation's prefixes are prefixes of each other
    (ChatML and most others). The last assistant answer, when it has ``token_ids`` (the ids the target generated:
    regeneration keeps them), is trained on those ids after the generation prompt the target answered, not on its
    text re-encoded (:func:`_render_generated_answer`; the user turns after it, which hold nothing to train, are
    left out). Earlier answers are rendered from their text, as the target saw them when answering later turns.
    Returns None when nothing trainable fits in ``max_length``.

    Raises:
        ValueError: the template breaks the prefix rule, or an answer's ``token_ids`` do not decode to its text.
    """
    last = _last_answer(messages)
    generated = None if last is None else answer_token_ids(tokenizer, messages[last])
    if generated is None:
        input_ids, loss_mask = _render_text_turns(tokenizer, messages)
    else:
        input_ids, loss_mask = _render_generated_answer(tokenizer, messages[: last + 1], generated)
    input_ids, loss_mask = input_ids[:max_length], loss_mask[:max_length]
    if sum(loss_mask[2:]) == 0:
        return None
    return {"input_ids": input_ids, "loss_mask": loss_mask}


def _last_answer(messages: list[dict]) -> int | None:
    """Index of the conversation's last assistant message, None when it has none."""
    return next((index for index in reversed(range(len(messages))) if messages[index]["role"] == "assistant"), None)


def _render_text_turns(tokenizer: PreTrainedTokenizerBase, messages: list[dict]) -> tuple[list[int], list[int]]:
    """Tokens of ``messages`` rendered from their text, and the mask that is 1 on the assistant tokens."""
    input_ids: list[int] = []
    loss_mask: list[int] = []
    for end, message in enumerate(messages, start=1):
        rendered = tokenizer.apply_chat_template(messages[:end], tokenize=True, return_dict=False)
        _check_prefix(input_ids, rendered)
        if message["role"] == "assistant":
            header = tokenizer.apply_chat_template(
                messages[: end - 1], tokenize=True, add_generation_prompt=True, return_dict=False
            )
            trained = (
                len(without_end_marker(tokenizer, messages[:end], rendered))
                if message.get("truncated")
                else len(rendered)
            )
            loss_mask += (
                [0] * (len(header) - len(input_ids)) + [1] * (trained - len(header)) + [0] * (len(rendered) - trained)
            )
        else:
            loss_mask += [0] * (len(rendered) - len(input_ids))
        input_ids = list(rendered)
    return input_ids, loss_mask


def _render_generated_answer(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict], generated: list[int]
) -> tuple[list[int], list[int]]:
    """Tokens and mask of ``messages[:-1]`` rendered from their text, then the generation prompt, exactly
    ``generated`` (the ids the target generated for the answer ``messages[-1]``) and, unless the answer is
    ``truncated``, the template's closing of the turn; the mask is 1 on ``generated`` and the closing."""
    input_ids, loss_mask = _render_text_turns(tokenizer, messages[:-1])
    header = tokenizer.apply_chat_template(messages[:-1], tokenize=True, add_generation_prompt=True, return_dict=False)
    _check_prefix(input_ids, header)
    closing = [] if messages[-1].get("truncated") else closing_ids(tokenizer, messages)
    trained = generated + closing
    return list(header) + trained, loss_mask + [0] * (len(header) - len(input_ids)) + [1] * len(trained)


def _check_prefix(input_ids: list[int], rendered: list[int]) -> None:
    if list(rendered[: len(input_ids)]) != input_ids:
        raise ValueError("The chat template does not render conversation prefixes as token prefixes.")


def load_samples(
    tokenizer: PreTrainedTokenizerBase, path: str | Path, max_length: int, limit: int | None = None,
    length_name: str = "max_length",
) -> list[dict[str, list[int]]]:
    """The first ``limit`` conversations of a JSONL file, tokenised (those with nothing trainable dropped).

    Raises:
        ValueError: when none holds an assistant token within ``max_length`` (the setting ``length_name``).
    """
    conversations = list(read_conversations(path, limit))
    samples = [s for s in (tokenize_conversation(tokenizer, c, max_length) for c in conversations) if s]
    if not samples:
        raise ValueError(
            f"{path}: none of its {len(conversations)} conversations read holds an assistant answer to train on "
            f"within {length_name}={max_length}: give conversations with answers (trainers/regenerate_sharegpt.py "
            f"writes them), or raise {length_name}."
        )
    return samples


def padding_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The id right-padding uses: the pad token, else EOS, else 0 (padded positions are masked out)."""
    return next((t for t in (tokenizer.pad_token_id, tokenizer.eos_token_id) if t is not None), 0)


def build_draft_vocabulary(
    samples: Iterable[dict[str, list[int]]], draft_vocab_size: int, vocab_size: int, keep: Iterable[int] = ()
) -> torch.LongTensor:
    """EAGLE's draft vocabulary: the ``draft_vocab_size`` most frequent assistant tokens, sorted.

    ``keep`` (a trained drafter's vocabulary, when it is widened) is taken first and the most frequent
    other tokens fill the rest. When the data holds fewer distinct tokens, the lowest unused ids do.
    """
    chosen = {int(t) for t in keep}
    smallest = max(1, len(chosen))
    if not smallest <= draft_vocab_size <= vocab_size:
        raise ValueError(f"draft_vocab_size must be in {smallest}..{vocab_size}, got {draft_vocab_size}.")
    counts: Counter[int] = Counter()
    for sample in samples:
        counts.update(t for t, m in zip(sample["input_ids"], sample["loss_mask"]) if m)
    frequent = (token for token, _ in counts.most_common())
    filler = (t for t in range(vocab_size) if t not in chosen)
    for token in itertools.chain(frequent, filler):
        if len(chosen) == draft_vocab_size:
            break
        chosen.add(token)
    return torch.tensor(sorted(chosen), dtype=torch.long)


def check_vocabulary_coverage(
    draft: Eagle3DraftModel, samples: Iterable[dict], init_from: str | None, resumed: str | None = None
) -> None:
    """Refuse data whose ``loss_mask`` is 0 everywhere, and a draft vocabulary that holds none of the tokens
    ``samples`` train (``loss_mask`` 1); warn when it holds less than :data:`LOW_VOCABULARY_SHARE` of them: the loss
    reads only the answer positions whose token the drafter can draft (:func:`~.ttt.ttt_loss`), so the others train
    nothing, and with none the run logs a loss of 0 and changes nothing (``init_from``'s vocabulary, kept as it is,
    may be another data's). The fix named is a resumed run's (``resumed``: the checkpoint whose vocabulary it keeps)
    when it resumes one; the warning is logged once per drafter (the script checks before the trainer does)."""
    vocabulary = set(draft.draft_to_target().tolist())
    trained = held = 0
    for index, sample in enumerate(samples):
        check_training_row(index, sample, draft.config.vocab_size)
        # ints: a tensor hashes by identity, so a tensor row's tokens were never found in the vocabulary
        tokens = [int(token) for token, mask in zip(sample["input_ids"], sample["loss_mask"]) if mask]
        trained, held = trained + len(tokens), held + sum(token in vocabulary for token in tokens)
    if not trained:
        raise ValueError(
            "Every loss_mask of the training data is 0: there is no answer token to train, so the run would log a loss "
            "of 0, change nothing, and save a card saying it trained. Set loss_mask to 1 on the assistant tokens (as "
            "tokenize_conversation does)."
        )
    share = held / trained
    if share >= LOW_VOCABULARY_SHARE:
        return
    owner = f"the checkpoint {resumed or init_from}" if resumed or init_from else "the new drafter"
    fix = _widen_vocabulary_fix(len(vocabulary), init_from, resumed)
    if not share:
        raise ValueError(
            f"The draft vocabulary of {owner} ({len(vocabulary)} tokens) holds none of the {trained} answer "
            "tokens the data trains: the loss reads only the tokens the drafter can draft, so the run would log a "
            f"loss of 0 and train nothing. {fix}, or train on data the vocabulary was built for."
        )
    _warn_once(
        draft,
        f"The draft vocabulary of {owner} ({len(vocabulary)} tokens) holds {100 * share:.0f}% of the {trained} answer "
        f"tokens the data trains: the others train nothing (the loss reads only the tokens the drafter can draft). "
        f"{fix}."
    )


#: the coverage warnings logged per drafter: the script checks its data before the trainer checks it again
_COVERAGE_WARNED: weakref.WeakKeyDictionary[Eagle3DraftModel, set[str]] = weakref.WeakKeyDictionary()


def _warn_once(draft: Eagle3DraftModel, message: str) -> None:
    """Log ``message`` unless it was logged for ``draft`` already (a new run's drafter is warned again)."""
    warned = _COVERAGE_WARNED.setdefault(draft, set())
    if message not in warned:
        warned.add(message)
        logger.warning(message)


def _widen_vocabulary_fix(size: int, init_from: str | None, resumed: str | None) -> str:
    """How to give the drafter more of the data's tokens: a resumed run keeps its checkpoint's vocabulary (resuming
    refuses another ``draft_vocab_size``), so a new run from it widens it."""
    if resumed:
        return (f"This run resumes {resumed}, whose vocabulary it keeps (a resume refuses another draft_vocab_size): "
                f"to widen it, start a new run with init_from={resumed} and draft_vocab_size above {size} (its "
                "trained rows are kept)")
    if init_from:
        return (f"Set draft_vocab_size above {size} to widen it with the data's most frequent tokens (the "
                "checkpoint's trained rows are kept; from Python: widen_vocabulary)")
    return "Raise draft_vocab_size (from Python: build the drafter's vocabulary with build_draft_vocabulary)"


def check_training_row(index: int, sample: object, vocab_size: int) -> None:
    """Refuse a training row that is not a conversation as :func:`tokenize_conversation` builds it: a mapping with
    ``input_ids`` (ids below ``vocab_size``) and a ``loss_mask`` of the same length (a string row, a missing column,
    another length or an id past the vocabulary failed inside collation, the loss or the embedding)."""
    fix = "each needs input_ids and a loss_mask of 1 on the answer tokens, as tokenize_conversation builds them"
    if not isinstance(sample, Mapping):
        raise ValueError(
            f"Conversation {index} of the training data is a {type(sample).__name__}, not a mapping: {fix}."
        )
    missing = [key for key in ("input_ids", "loss_mask") if key not in sample]
    if missing:
        raise ValueError(f"Conversation {index} of the training data has no {' or '.join(missing)} (keys "
                         f"{sorted(sample)}): {fix}.")
    ids, mask = list(sample["input_ids"]), list(sample["loss_mask"])
    if len(ids) != len(mask):
        raise ValueError(f"Conversation {index} of the training data has {len(ids)} input_ids and a loss_mask of "
                         f"{len(mask)}: {fix}.")
    outside = [token for token in ids if not 0 <= int(token) < vocab_size]
    if outside:
        raise ValueError(f"Conversation {index} of the training data holds token ids outside the target's vocabulary "
                         f"of {vocab_size} (e.g. {outside[:3]}): tokenize it with the target's tokenizer.")


def dataset_rows(dataset: Sequence | Iterable) -> Iterable[dict]:
    """The rows of a dataset with a length: iterated where it can be (a list, a ``datasets.Dataset``), else indexed
    (a map-style torch ``Dataset``)."""
    if isinstance(dataset, Iterable):
        return dataset
    return (dataset[index] for index in range(len(dataset)))


def collate(samples: list[dict[str, list[int]]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-pad ``input_ids`` / ``loss_mask`` and add a 0/1 ``attention_mask``."""
    length = max(len(s["input_ids"]) for s in samples)
    batch = {"input_ids": [], "loss_mask": [], "attention_mask": []}
    for s in samples:
        pad = length - len(s["input_ids"])
        batch["input_ids"].append(list(s["input_ids"]) + [pad_token_id] * pad)
        batch["loss_mask"].append(list(s["loss_mask"]) + [0] * pad)
        batch["attention_mask"].append([1] * len(s["input_ids"]) + [0] * pad)
    return {key: torch.tensor(value, dtype=torch.long) for key, value in batch.items()}


class ConversationStream(IterableDataset):
    """Tokenised conversations re-read from a JSONL file at every pass, so a file that is still
    growing (regeneration running beside training) feeds every new record into later passes.

    Each pass shuffles the records (seed + pass number) and sorts chunks of ``chunk_size``
    samples by length, so consecutive samples (one batch) need little padding. ``limit``: only the
    file's first ``limit`` records (the script's ``num_conversations``).

    One iteration runs the passes back to back and never ends (``max_steps`` ends the run), so a run resumed from a
    checkpoint skips the batches it trained, whatever pass they were in, and goes on where it stopped, as Trainer
    resumes any dataset (skipping tokenises what it skips: about 6 ms a conversation for SmolLM2 on two CPU cores).
    The order resumed is the uninterrupted run's as long as the file holds what it held then.

    ``prompts_read``: the :func:`~.lineage.prompt_digest` of every sample yielded so far (records appended while it
    runs included), for the drafter's ``trained_prompts.json``.
    """

    def __init__(
        self, path: str | Path, tokenizer: PreTrainedTokenizerBase, max_length: int, seed: int = 0,
        chunk_size: int = 64, limit: int | None = None,
    ):
        self.path, self.tokenizer, self.max_length = path, tokenizer, max_length
        self.seed, self.chunk_size, self.limit = seed, chunk_size, limit
        self.prompts_read: set[str] = set()

    def __iter__(self) -> Iterator[dict[str, list[int]]]:
        for number in itertools.count():
            trained = 0
            for sample in self.one_pass(number):
                trained += 1
                self.prompts_read.add(prompt_digest(sample))
                yield sample
            if not trained:
                raise ValueError(
                    f"{self.path} holds no conversation with an assistant token within max_length={self.max_length} "
                    f"(pass {number}): nothing to train. Check the file, or raise max_length."
                )

    def one_pass(self, number: int) -> Iterator[dict[str, list[int]]]:
        """Pass ``number``: the file's conversations as it holds them now, in that pass's order."""
        conversations = list(itertools.islice(read_conversations(self.path), self.limit))
        random.Random(self.seed + number).shuffle(conversations)
        for start in range(0, len(conversations), self.chunk_size):
            chunk = (
                tokenize_conversation(self.tokenizer, c, self.max_length)
                for c in conversations[start : start + self.chunk_size]
            )
            yield from sorted((s for s in chunk if s), key=lambda s: len(s["input_ids"]))
