"""A bounded on-disk cache of what the frozen target computes for each training conversation.

Every pass over the training data runs the same conversations through the same frozen target. The cache keeps
what the first pass computed for each conversation (the drafter's fused features and the final-norm hidden states
the loss's target logits come from, in the target's dtype, exactly as computed) so that later passes read them
instead of running the target. It is bounded on disk (``max_gigabytes``: conversations past it are computed every
pass, as without a cache) and holds one batch in memory at a time. A folder written for one target, dtype or set of
feature layers is refused for another (:meth:`FeatureCache.check_signature`).

Layout of the folder: ``manifest.json`` (the signature), ``features.bin`` (rows appended, ``[tokens, width]`` each)
and ``index.jsonl`` (one ``{"key", "offset", "tokens"}`` line per row, written after its data, so a run killed
mid-write leaves no entry pointing at missing bytes). One process writes a folder: each rank of a multi-process
run takes its own (``Eagle3Trainer`` adds ``rank<N>``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import PreTrainedModel

MANIFEST, DATA, INDEX = "manifest.json", "features.bin", "index.jsonl"
_FINGERPRINT_SAMPLES = 256


def target_signature(target: PreTrainedModel, layer_ids: list[int]) -> dict:
    """What the cached rows depend on: a fingerprint of the target's weights (evenly spaced values of every
    parameter, with names and shapes), its dtype, the feature layers and the row width."""
    digest = hashlib.sha256()
    for name, parameter in target.named_parameters():
        flat = parameter.detach().reshape(-1)
        count = min(_FINGERPRINT_SAMPLES, flat.numel())
        picks = (torch.arange(count) * (flat.numel() - 1) // max(count - 1, 1)).to(flat.device)  # integers: exact
        digest.update(f"{name}{tuple(parameter.shape)}".encode())
        digest.update(flat[picks].float().cpu().numpy().tobytes())
    hidden = target.config.hidden_size
    return {
        "target_weights": digest.hexdigest()[:32],
        "dtype": str(target.dtype).removeprefix("torch."),
        "layer_ids": [int(i) for i in layer_ids],
        "width": (len(layer_ids) + 1) * hidden,
    }


class FeatureCache:
    """Rows of target outputs on disk, keyed by the conversation's tokens.

    Args:
        directory: the cache's folder (made if missing; reused across runs and stages with the same signature).
        max_gigabytes: the most ``features.bin`` may hold; rows that would pass it are not stored.
        signature: :func:`target_signature` of the target the rows come from.

    Counts ``hits``, ``misses`` and ``refused`` (rows not stored for want of room) since it was opened.
    """

    def __init__(self, directory: str | Path, max_gigabytes: float, signature: dict):
        if max_gigabytes <= 0:
            raise ValueError(
                f"feature_cache_max_gb must be positive, got {max_gigabytes}: leave feature_cache_dir unset instead."
            )
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.check_signature(signature)
        self.max_bytes = int(max_gigabytes * 2**30)
        self.dtype = getattr(torch, signature["dtype"])
        self.width = signature["width"]
        self.hidden_size = self.width // (len(signature["layer_ids"]) + 1)
        self.row_bytes = self.width * torch.empty((), dtype=self.dtype).element_size()
        (self.directory / DATA).touch()
        self.size = os.path.getsize(self.directory / DATA)
        self.index = self._read_index()
        self.hits = self.misses = self.refused = 0

    def check_signature(self, signature: dict) -> None:
        """Write the manifest of a new folder; refuse a folder written for another target, dtype or layers."""
        manifest = self.directory / MANIFEST
        if not manifest.exists():
            manifest.write_text(json.dumps(signature, indent=1) + "\n")
            return
        stored = json.loads(manifest.read_text())
        if stored != signature:
            changed = sorted(k for k in {*stored, *signature} if stored.get(k) != signature.get(k))
            cached, now = [stored.get(k) for k in changed], [signature.get(k) for k in changed]
            raise ValueError(
                f"The feature cache {self.directory} holds rows of another target setup ({', '.join(changed)} differ: "
                f"cached {cached}, now {now}); its rows would "
                "train the drafter on features this target does not compute. Point feature_cache_dir at a new folder, "
                "or delete this one."
            )

    def _read_index(self) -> dict[str, tuple[int, int]]:
        """``key -> (offset, tokens)`` of every row whose bytes are on disk (a line cut by a crash is skipped)."""
        index = {}
        path = self.directory / INDEX
        text = path.read_text() if path.exists() else ""
        if text and not text.endswith("\n"):  # a line cut by a crash: end it, so the next entry starts its own
            with open(path, "a") as cut:
                cut.write("\n")
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry["offset"] + entry["tokens"] * self.row_bytes <= self.size:
                index[entry["key"]] = (entry["offset"], entry["tokens"])
        return index

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
        """Store ``row`` (``[len(token_ids), width]``, the cache's dtype) unless it is held or would pass the bound."""
        if row.shape != (len(token_ids), self.width) or row.dtype != self.dtype:
            raise ValueError(f"A row of {len(token_ids)} tokens must be [{len(token_ids)}, {self.width}] {self.dtype}, "
                             f"got {list(row.shape)} {row.dtype}.")
        key = self.key(token_ids)
        if key in self.index:
            return True
        if self.size + len(token_ids) * self.row_bytes > self.max_bytes:
            self.refused += 1
            return False
        with open(self.directory / DATA, "ab") as data:
            data.write(row.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        with open(self.directory / INDEX, "a") as index:
            index.write(json.dumps({"key": key, "offset": self.size, "tokens": len(token_ids)}) + "\n")
        self.index[key] = (self.size, len(token_ids))
        self.size += len(token_ids) * self.row_bytes
        return True


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
            cache.put(tokens[row], rows[row])
    batch = torch.zeros(*input_ids.shape, cache.width, dtype=cache.dtype, device=input_ids.device)
    for row, values in enumerate(rows):
        batch[row, : lengths[row]] = values.to(input_ids.device)
    return batch[..., : -cache.hidden_size], batch[..., -cache.hidden_size :]
