"""Which drafter a learned policy was trained with, and whether a ``generate`` call drafts with it.

A learned policy's choices follow how often its drafter is right: trained on one drafter's acceptance, it
drafts too deep or too shallow for a drafter that is right more or less often, and nothing in the output
shows it (the output is exact either way). Drafters are named by folder, and a retrained drafter keeps its
folder's name, so a policy records a digest of its drafter's weights as well; the engine compares it with
the call's drafter and says so when they differ (``out.speculation.policy_drafter_mismatch``).
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass

import torch

from .packaged import unseen_writes

_IDENTITY_KEYS = {"name", "weights"}


@dataclass(frozen=True)
class DrafterIdentity:
    """A drafter's name (its checkpoint, as profiles name it) and :func:`weights_digest` of its weights."""

    name: str
    weights: str

    @classmethod
    def from_config(cls, value: dict | None) -> DrafterIdentity | None:
        """A policy config's ``trained_for_drafter`` entry (None when the policy records none)."""
        if not value:
            return None
        if not isinstance(value, dict) or set(value) != _IDENTITY_KEYS:
            raise ValueError(
                f"A policy's trained_for_drafter must be a dict with name and weights (as mark_trained_on writes it), "
                f"got {value!r}: fix or remove it in the policy's config.json."
            )
        return cls(**value)

    def to_config(self) -> dict[str, str]:
        """The ``trained_for_drafter`` entry of a policy's config (what :meth:`from_config` reads)."""
        return {"name": self.name, "weights": self.weights}


def weights_digest(module: torch.nn.Module) -> str:
    """A digest of ``module``'s state dict that does not depend on the dtype or device it was loaded in: each
    floating tensor is rounded to bfloat16 first, so one checkpoint loaded in float32 or bfloat16 gives one
    digest."""
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(module.state_dict().items()):
        dtype = torch.bfloat16 if tensor.is_floating_point() else tensor.dtype
        data = tensor.detach().to("cpu", dtype).contiguous().reshape(-1)
        digest.update(f"{name}:{tuple(tensor.shape)};".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


#: module -> (its tensors' identities and versions when digested, the digest)
_DIGESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cached_weights_digest(module: torch.nn.Module) -> str:
    """:func:`weights_digest`, computed again only after a tensor of ``module`` was replaced or changed in
    place, or a write no version shows was marked (``weights_changed()``, :func:`~.packaged.mark_weights_changed`,
    on the module or a submodule it shares: a write through ``.data`` bumps no version, as for the fast path's
    graphs). Tensors made under ``torch.inference_mode`` keep no version: they can only change by being replaced or
    marked."""
    tensors = tuple((id(t), None if t.is_inference() else t._version)
                    for t in module.state_dict(keep_vars=True).values())
    state = (tensors, tuple(unseen_writes(submodule) for submodule in module.modules()))
    cached = _DIGESTS.get(module)
    if cached is None or cached[0] != state:
        cached = (state, weights_digest(module))
        _DIGESTS[module] = cached
    return cached[1]


def drafter_mismatch(
    policy_name: str,
    trained_for: DrafterIdentity | None,
    drafter_name: str,
    drafter_weights: str | None,
    learned: bool = True,
) -> str | None:
    """The report for a policy trained with another drafter than the call's, whose weights digest is
    ``drafter_weights`` (None: a drafter that cannot be matched by its weights); None when they match or the
    policy records no drafter. ``learned=False``: a static or heuristic policy chosen for that drafter, re-chosen
    rather than retrained."""
    if trained_for is None or drafter_weights == trained_for.weights:
        return None
    running = f"this call drafts with {drafter_name}" + (
        ", whose weights are not those"
        if drafter_weights is not None
        else ", which cannot be matched to it by its weights"
    )
    if not learned:
        return (
            f"{policy_name} was chosen for the drafter {trained_for.name} (weights {trained_for.weights[:12]}) and "
            f"{running}: its settings assume another drafter's acceptance. Record this drafter (`hf-adaptive-spec "
            "record`) and `hf-adaptive-spec profile --recording DIR` recommends the tree for it."
        )
    return (
        f"{policy_name} was trained with the drafter {trained_for.name} (weights {trained_for.weights[:12]}) and "
        f"{running}: its choices assume another drafter's acceptance. Retrain the policy on a recording of this "
        "drafter (`hf-adaptive-spec record`, then `hf-adaptive-spec profile --recording DIR` and the policy's "
        "trainer), or use a StaticTreePolicy."
    )
