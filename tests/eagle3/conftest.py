"""A tiny random Llama target and EAGLE-3 drafters for it, built from fixed seeds."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

torch.set_num_threads(1)

DRAFT_VOCAB = 24
TARGET_LAYERS = 6
CUSTOM_IDS = [2, 3, 4]  # differ from the default [1, L//2, L-1] = [1, 3, 5] of the 6-layer target


@pytest.fixture(scope="session")
def target():
    """LlamaForCausalLM: 6 layers (room for feature ids other than the default), hidden 64, vocab 96, sdpa, enabled."""
    return tiny_model("llama", num_hidden_layers=TARGET_LAYERS)


@pytest.fixture(scope="session")
def frequent_tokens(target) -> torch.LongTensor:
    """The DRAFT_VOCAB target tokens the target generates most, sorted (EAGLE's draft vocabulary recipe)."""
    outputs = [target.generate(prompt(8, seed=s), max_new_tokens=40, do_sample=False) for s in range(6)]
    counts = torch.bincount(torch.cat([out[0, 8:] for out in outputs]), minlength=target.config.vocab_size)
    return counts.argsort(descending=True, stable=True)[:DRAFT_VOCAB].sort().values


def make_draft_model(target, seed: int = 1, draft_to_target=None, **config_kwargs) -> Eagle3DraftModel:
    """A random drafter for ``target``; norms get random weights too, so every tensor matters."""
    torch.manual_seed(seed)
    model = Eagle3DraftModel.from_target(
        target, draft_to_target=draft_to_target, initializer_range=0.3, **config_kwargs
    )
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)
    return model.eval()


@torch.no_grad()
def draft_logits(model: Eagle3DraftModel, target, ids: torch.LongTensor) -> torch.Tensor:
    """Step-0 draft logits over ``ids`` from the target's hidden states (no cache)."""
    hidden_states = target(ids, output_hidden_states=True).hidden_states
    return model(ids[:, 1:], model.gather_target_features(hidden_states)[:, :-1]).logits
