"""Host work per cycle grows with the tree's depth, not with depth × top_k: the engine reads drafts
back to the host once per level (one top-k for the whole level), not once per frontier node. On a
GPU each read or upload is a device synchronisation, so a per-node count would make a cycle
host-bound. Counted with a TorchFunctionMode on the static-cache path (the GPU-shaped one)."""

from __future__ import annotations

from collections import Counter

import torch
from tiny_models import prompt, tiny_model
from torch.overrides import TorchFunctionMode

import hf_adaptive_spec as hfas

READS = {torch.Tensor.tolist, torch.Tensor.item, torch.Tensor.__bool__, torch.Tensor.__int__, torch.Tensor.__float__,
         torch.Tensor.__index__}  # fmt: skip
UPLOADS = {torch.tensor, torch.as_tensor}


class HostTraffic(TorchFunctionMode):
    """Counts tensor reads to Python values and tensors built from Python data."""

    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in READS:
            self.counts["read"] += 1
        elif func in UPLOADS:
            self.counts["upload"] += 1
        return func(*args, **(kwargs or {}))


def _per_cycle(model, depth: int, top_k: int) -> dict[str, float]:
    """Reads and uploads per cycle with the target itself as drafter (its top draft is always the
    target's choice, so every tree accepts about ``depth`` tokens whatever ``top_k``)."""
    policy = hfas.StaticTreePolicy(depth=depth, top_k=top_k, total_tokens=32)
    with HostTraffic() as traffic:
        out = model.generate(
            prompt(9), max_new_tokens=31, do_sample=False, assistant_model=hfas.CausalLMDrafter(model),
            assistant_policy=policy, cache_implementation="static", return_dict_in_generate=True,
        )
    cycles = out.speculation.cycles
    return {kind: traffic.counts[kind] / cycles for kind in ("read", "upload")}


def test_host_reads_and_uploads_grow_with_depth_not_with_top_k():
    model = tiny_model("llama")
    narrow, wide, deep = _per_cycle(model, 3, 2), _per_cycle(model, 3, 8), _per_cycle(model, 5, 2)
    for kind in ("read", "upload"):
        # 8 frontier nodes instead of 2 on two levels: per-node reads would add >= 12 per cycle
        assert abs(wide[kind] - narrow[kind]) < 3, (kind, narrow, wide)
        assert deep[kind] > narrow[kind] + 2, (kind, narrow, deep)  # two more levels, a few reads each
    assert narrow["read"] < 25 and narrow["upload"] < 25, narrow
