"""What the replay tests share: a cost profile in round numbers and the drafter they record with."""

from __future__ import annotations

import hf_adaptive_spec as hfas
from hf_adaptive_spec.profiling import HardwareProfile

#: an eager float32 profile timed at 1, 4 and 16 tokens, in round numbers
UNIT_PROFILE = HardwareProfile(
    device="cpu", dtype="float32", num_threads=1, context_length=64,
    verify_tokens=[1, 4, 16], verify_seconds=[1.0, 1.5, 3.0], draft_step_seconds=0.1,
)


def two_layer_drafter(target) -> hfas.CausalLMDrafter:
    """A drafter of ``target``'s first two layers: often wrong, so replays hold rejections."""
    return hfas.CausalLMDrafter.from_target_layers(target, 2)
