"""Which tokens a cache holds after a ``generate`` call, so that a later call continuing from it can check
its input.

A KV cache stores keys and values, not the tokens they came from. Stock ``generate`` continues from any
cache it is given and takes ``input_ids``' first ``cache.get_seq_length()`` tokens to be the cached ones;
passing a cache filled for another prompt (a ``StaticCache`` reused without ``reset()``) silently decodes
from the wrong context. The engine remembers the tokens of each cache it fills, and refuses a continuation
whose input does not begin with them while the cache is as the engine left it (its first layer's keys
tensor the same object, at the same version). A cache filled or changed elsewhere since (stock
``generate``, ``crop``, ``reset``), or made under ``torch.inference_mode`` (whose tensors keep no
version), is taken as stock takes it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from transformers import Cache

from .static_cache import is_static_cache


@dataclass(frozen=True)
class _KeysIdentity:
    """The first layer's keys tensor (weakly) and its version: both unchanged means no write since."""

    keys: weakref.ref
    version: int

    @classmethod
    def of(cls, cache: Cache) -> _KeysIdentity | None:
        keys = getattr(cache.layers[0], "keys", None) if cache.layers else None
        if not isinstance(keys, torch.Tensor) or keys.is_inference():
            return None
        return cls(weakref.ref(keys), keys._version)

    def matches(self, cache: Cache) -> bool:
        now = _KeysIdentity.of(cache)
        return now is not None and self.keys() is now.keys() and self.version == now.version


@dataclass(frozen=True)
class _Contents:
    token_ids: torch.Tensor  # [n]: the tokens whose keys and values the cache holds, in order
    identity: _KeysIdentity


_CONTENTS: weakref.WeakKeyDictionary[Cache, _Contents] = weakref.WeakKeyDictionary()


def remember_tokens(cache: Cache, token_ids: torch.Tensor) -> None:
    """Record that ``cache`` holds ``token_ids`` (``[n]``, copied on their device: no read to the host)."""
    identity = _KeysIdentity.of(cache)
    if identity is None:
        _CONTENTS.pop(cache, None)
    else:
        _CONTENTS[cache] = _Contents(token_ids.clone(), identity)


def check_continuation(cache: Cache | None, input_ids: torch.LongTensor) -> int:
    """How many of ``input_ids``' tokens ``cache`` already holds (0 for none); refused when that leaves no new
    token, or when this package filled the cache, nothing wrote to it since, and ``input_ids`` does not begin
    with the tokens it holds."""
    cached_length = int(cache.get_seq_length()) if cache is not None else 0  # a tensor in a StaticCache
    input_length = input_ids.shape[1]
    if cached_length >= input_length:
        raise ValueError(
            f"past_key_values already holds {cached_length} tokens, but input_ids has {input_length}: to continue "
            "from a cache, pass the whole sequence (the tokens the cache holds, then at least one new token), as "
            "stock generate expects; or pass a fresh cache."
        )
    contents = _CONTENTS.get(cache) if cached_length else None
    if contents is not None and contents.identity.matches(cache) and contents.token_ids.numel() == cached_length:
        _check_same_tokens(cache, contents.token_ids, input_ids[0, :cached_length])
    return cached_length


def _check_same_tokens(cache: Cache, held: torch.Tensor, given: torch.Tensor) -> None:
    differs = (held != given.to(held.device)).nonzero()
    if differs.numel() == 0:
        return
    first = int(differs[0, 0])
    crop = "" if is_static_cache(cache) else (
        f"; to continue from the {first} tokens they share, call cache.crop({first - held.numel()})")
    raise ValueError(
        f"past_key_values holds the {held.numel()} tokens an earlier generate call left in it, and input_ids differs "
        f"from them at token {first} (a conversation re-tokenized after decoding can differ so): to continue that "
        f"sequence, pass it whole followed by the new tokens{crop}; for another prompt, call cache.reset() first."
    )
