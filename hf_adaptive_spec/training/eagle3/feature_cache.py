"""A bounded on-disk cache of what the frozen target computes for each training conversation.

Every pass over the training data runs the same conversations through the same frozen target. The cache keeps
what the first pass computed for each conversation (the drafter's fused features and the final-norm hidden states
the loss's target logits come from, in the target's dtype, exactly as computed) so that later passes read them
instead of running the target. It is bounded on disk (``max_gigabytes``: conversations past it are computed every
pass, as without a cache) and holds one batch in memory at a time. A folder written for one target, dtype or set of
feature layers is refused for another (:meth:`FeatureCache.check_signature`).

Layout of the folder: ``manifest.json`` (the signature), ``features.bin`` (rows appended, ``[tokens, width]`` each)
and ``index.jsonl`` (one ``{"key", "offset", "tokens"}`` line per row, written after its data is synced; opening the
folder cuts both back to the rows stored whole). One process holds a folder at a time (a lock file; a second is
refused).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import PreTrainedModel

from ...core.files import lock_exclusively, write_text_atomically
from ...core.packaged import weights_digest

MANIFEST, DATA, INDEX, LOCK = "manifest.json", "features.bin", "index.jsonl", "lock"
#: the layout of ``features.bin``'s rows (``[features of layer_ids..., final hidden]`` per token); a new layout is a new
#: version, and a folder of another version is refused
CACHE_VERSION = 1


def target_signature(target: PreTrainedModel, layer_ids: list[int]) -> dict:
    """What the cached rows depend on: the target's configuration (its name aside) and every byte of its weights
    (:func:`~hf_adaptive_spec.core.packaged.weights_digest`), its dtype, the feature layers, the row width and
    layout."""
    config = target.config.to_diff_dict()
    config.pop("_name_or_path", None)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
    digest.update(weights_digest(target).encode())
    return {
        "version": CACHE_VERSION,
        "target": digest.hexdigest()[:32],
        "dtype": str(target.dtype).removeprefix("torch."),
        "layer_ids": [int(i) for i in layer_ids],
        "width": (len(layer_ids) + 1) * target.config.hidden_size,
    }


class FeatureCache:
    """Rows of target outputs on disk, keyed by the conversation's tokens.

    Args:
        directory: the cache's folder (made if missing; reused across runs and stages with the same signature, by
            one process at a time: a folder another open cache holds is refused).
        max_gigabytes: the most ``features.bin`` may hold; rows that would pass it are not stored.
        signature: :func:`target_signature` of the target the rows come from.

    Opening it drops what a crash left unfinished (index lines without their bytes, bytes without their index line).
    Counts ``hits``, ``misses`` and ``refused`` (rows not stored for want of room) since it was opened.
    """

    def __init__(self, directory: str | Path, max_gigabytes: float, signature: dict):
        check_bound(max_gigabytes)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_folder(self.directory)
        self.check_signature(signature)
        self.max_bytes = int(max_gigabytes * 2**30)
        self.dtype = getattr(torch, signature["dtype"])
        self.width = signature["width"]
        self.hidden_size = self.width // (len(signature["layer_ids"]) + 1)
        self.row_bytes = self.width * torch.empty((), dtype=self.dtype).element_size()
        self.index, self.size = self._recover()
        self.hits = self.misses = self.refused = 0

    def close(self) -> None:
        """Release the folder for another process (or another cache of this one)."""
        self._lock.close()

    def check_signature(self, signature: dict) -> None:
        """Write the manifest of a new folder; refuse a folder written for another target, dtype or layers."""
        manifest = self.directory / MANIFEST
        if not manifest.exists():
            write_text_atomically(manifest, json.dumps(signature, indent=1) + "\n")  # a crash leaves none, not half
            return
        stored = json.loads(manifest.read_text())
        if stored != signature:
            self.close()
            changed = sorted(k for k in {*stored, *signature} if stored.get(k) != signature.get(k))
            cached, now = [stored.get(k) for k in changed], [signature.get(k) for k in changed]
            raise ValueError(
                f"The feature cache {self.directory} holds rows of another target setup ({', '.join(changed)} differ: "
                f"cached {cached}, now {now}); its rows would "
                "train the drafter on features this target does not compute. Point feature_cache_dir at a new folder, "
                "or delete this one."
            )

    def _recover(self) -> tuple[dict[str, tuple[int, int]], int]:
        """``(key -> (offset, tokens), end)`` of the rows stored whole, in order; the index and data files are cut
        back to them (a crash, a full disk or a deleted data file can leave lines without bytes, or bytes after)."""
        data, index_path = self.directory / DATA, self.directory / INDEX
        data.touch()
        size, index, end = os.path.getsize(data), {}, 0
        lines = index_path.read_text().splitlines() if index_path.exists() else []
        for line in lines:
            entry = _parse_index_line(line)
            if entry is None or entry["offset"] != end or end + entry["tokens"] * self.row_bytes > size:
                break
            index[entry["key"]] = (end, entry["tokens"])
            end += entry["tokens"] * self.row_bytes
        if len(index) < len(lines) or end < size:
            kept = "".join(json.dumps({"key": k, "offset": o, "tokens": t}) + "\n" for k, (o, t) in index.items())
            write_text_atomically(index_path, kept)
            os.truncate(data, end)
        return index, end

    @staticmethod
    def key(token_ids: list[int]) -> str:
        return hashlib.sha256(torch.tensor(token_ids, dtype=torch.int64).numpy().tobytes()).hexdigest()

    def get(self, token_ids: list[int]) -> torch.Tensor | None:
        """The ``[len(token_ids), width]`` row stored for these tokens, or None."""
        found = self.index.get(self.key(token_ids))
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        offset, tokens = found
        with open(self.directory / DATA, "rb") as data:
            raw = os.pread(data.fileno(), tokens * self.row_bytes, offset)
        return torch.frombuffer(bytearray(raw), dtype=self.dtype).view(tokens, self.width)

    def put(self, token_ids: list[int], row: torch.Tensor) -> bool:
        """Store one row (:meth:`put_many`); whether the cache holds it now."""
        return self.put_many([(token_ids, row)]) == 1

    def put_many(self, rows: list[tuple[list[int], torch.Tensor]]) -> int:
        """Store each ``(token_ids, [len(token_ids), width] row in the cache's dtype)`` it does not hold and has room
        for: data first (synced), then its index lines. A full disk stores none of them. Returns how many it holds."""
        new, held, room = {}, 0, self.max_bytes - self.size
        for token_ids, row in rows:
            if row.shape != (len(token_ids), self.width) or row.dtype != self.dtype:
                raise ValueError(f"A row of {len(token_ids)} tokens must be [{len(token_ids)}, {self.width}] "
                                 f"{self.dtype}, got {list(row.shape)} {row.dtype}.")
            key = self.key(token_ids)
            if key in self.index or key in new:
                held += 1
            elif len(token_ids) * self.row_bytes > room:
                self.refused += 1
            else:
                new[key], room = row, room - len(token_ids) * self.row_bytes
        return held + self._append(new)

    def _append(self, rows: dict[str, torch.Tensor]) -> int:
        """Append ``key -> row`` to the data, then the index; on an ``OSError`` (a full disk) cut both back."""
        if not rows:
            return 0
        entries, offset = [], self.size
        try:
            with open(self.directory / DATA, "ab") as data:
                for key, row in rows.items():
                    data.write(row.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
                    entries.append({"key": key, "offset": offset, "tokens": row.shape[0]})
                    offset += row.shape[0] * self.row_bytes
                data.flush()
                os.fsync(data.fileno())
            with open(self.directory / INDEX, "a") as index:
                index.write("".join(json.dumps(entry) + "\n" for entry in entries))
        except OSError:
            self.refused += len(rows)
            self.index, self.size = self._recover()
            return 0
        self.index.update({entry["key"]: (entry["offset"], entry["tokens"]) for entry in entries})
        self.size = offset
        return len(rows)


def check_bound(max_gigabytes: float) -> None:
    """Refuse a bound that stores nothing (``Eagle3Config`` checks ``feature_cache_max_gb`` with it on parsing)."""
    if max_gigabytes <= 0:
        raise ValueError(
            f"feature_cache_max_gb must be positive, got {max_gigabytes}: to train without a cache, leave "
            "feature_cache_dir unset."
        )


def _parse_index_line(line: str) -> dict | None:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        return None
    return entry if isinstance(entry, dict) and {"key", "offset", "tokens"} <= entry.keys() else None


def _lock_folder(directory: Path):
    """An exclusive lock on ``directory`` held by the returned open file (released when it closes)."""
    return lock_exclusively(directory / LOCK, (
        f"The feature cache {directory} is open in another process (or another cache here): two writers would "
        "interleave their rows. Give each run its own feature_cache_dir, or wait for the other to end."
    ))


def right_padded_lengths(attention_mask: torch.Tensor) -> list[int]:
    """Each row's length; a mask that is not ones then zeros (left padding, holes) is refused."""
    lengths = attention_mask.sum(dim=1)
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    if not torch.equal(attention_mask.bool(), positions[None] < lengths[:, None]):
        raise ValueError("The feature cache keys rows by their tokens before the padding: pad batches on the right "
                         "(attention_mask ones then zeros), as eagle3's collate does.")
    return lengths.tolist()


RunTarget = Callable[[torch.LongTensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def read_through(
    cache: FeatureCache, run: RunTarget, input_ids: torch.LongTensor, attention_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``run``'s ``(features, final hidden states)`` for a right-padded batch, each row read from ``cache`` when
    it holds it; the target runs once over the rows it lacks (cut to their longest), whose outputs are then stored.
    Padded positions are zeros (the drafter's loss never reads them: they follow every real token)."""
    lengths = right_padded_lengths(attention_mask)
    tokens = [input_ids[row, :length].tolist() for row, length in enumerate(lengths)]
    rows = [cache.get(ids) for ids in tokens]
    missing = [row for row, found in enumerate(rows) if found is None]
    if missing:
        width = max(lengths[row] for row in missing)
        features, final_hidden = run(input_ids[missing, :width], attention_mask[missing, :width])
        computed = torch.cat([features, final_hidden], dim=-1)
        for position, row in enumerate(missing):
            rows[row] = computed[position, : lengths[row]]
        cache.put_many([(tokens[row], rows[row]) for row in missing])
    batch = torch.zeros(*input_ids.shape, cache.width, dtype=cache.dtype, device=input_ids.device)
    for row, values in enumerate(rows):
        batch[row, : lengths[row]] = values.to(input_ids.device)
    return batch[..., : -cache.hidden_size], batch[..., -cache.hidden_size :]
