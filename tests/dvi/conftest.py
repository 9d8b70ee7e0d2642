"""A tiny random Llama target (4 layers) and DVI drafters for it; fixed seeds."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.dvi import DVIDrafter, DVIOnlineLearnerConfig

torch.set_num_threads(1)

EXIT_LAYER = 2
CHAIN = hfas.StaticTreePolicy.chain(4)
TREE = hfas.StaticTreePolicy(depth=3, top_k=3, total_tokens=8)  # pruned: 1 + 3 + 3 + 3 > 8 candidates


def fast_online_config(**overrides) -> DVIOnlineLearnerConfig:
    """Updates every few records, a short schedule and a large learning rate: learning shows in seconds."""
    values = {"update_every": 8, "batch_size": 32, "warmup_updates": 5, "ramp_updates": 5, "learning_rate": 1e-2}
    values.update(overrides)
    return DVIOnlineLearnerConfig(**values)


@pytest.fixture(scope="module")
def target():
    """A fresh tiny Llama per test module (modules may rename it); enabled, eval mode."""
    return tiny_model("llama")


def make_drafter(target, online: bool = True, share_cache: bool | None = None, **overrides) -> DVIDrafter:
    """``share_cache=False`` for tests that drive begin_tree/expand by hand (no engine cache to share)."""
    torch.manual_seed(0)
    return DVIDrafter(
        target,
        exit_layer=EXIT_LAYER,
        online=online,
        online_config=fast_online_config(**overrides) if online else None,
        share_cache=share_cache,
    )


def prompts(count: int = 4, length: int = 6) -> list[torch.LongTensor]:
    return [prompt(length, seed=seed) for seed in range(count)]


def lora_state(drafter: DVIDrafter) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in drafter.head.named_parameters() if "lora_" in name}
