"""A trainer's seeded generator on one device and the tensors it draws for on another (a CPU generator, a policy or
drafter on a GPU): every draw is made on the generator's device. On a GPU, ``torch.multinomial(cuda_probs,
generator=cpu_generator)`` raised "Expected a 'cuda' device type for generator but found 'cpu'" (as do ``rand``,
``randperm`` and ``randint`` with a ``device`` other than the generator's). A CPU-only machine has one device with data,
so here the generator stands on ``meta`` and torch's draws are replaced by ones that refuse a device mismatch as CUDA's
do."""

from __future__ import annotations

import types

import pytest
import torch
from tiny_models import prompt, tiny_model
from transformers import DynamicCache

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.policies.base import DraftStepInfo
from hf_adaptive_spec.policies.ltd import LTDPolicy
from hf_adaptive_spec.training.ltd import Phase
from hf_adaptive_spec.training.ltd.phases import PhasePolicy
from hf_adaptive_spec.training.ppow import (
    WindowVerdicts,
    WindowVerifier,
    accepted_prefix_lengths,
    draft_windows,
    first_draft_step,
    select_prefixes,
)

torch.set_num_threads(1)

ELSEWHERE = types.SimpleNamespace(device=torch.device("meta"))  # a generator on another device than the tensors


def _check_device(name: str, device: torch.device | str | None, generator) -> None:
    if generator is ELSEWHERE and torch.device(device or "cpu") != generator.device:
        raise RuntimeError(f"{name}: expected a '{torch.device(device or 'cpu').type}' device type for generator but "
                           f"found '{generator.device.type}'")


@pytest.fixture
def draws(monkeypatch) -> list[str]:
    """torch's draws, strict about the generator's device as CUDA's are; a draw with ``ELSEWHERE`` returns a fixed
    result on the CPU (the tensors here are the CPU's). Returns the names of the draws made with ``ELSEWHERE``."""
    made = []
    real = {name: getattr(torch, name) for name in ("multinomial", "rand", "randperm", "randint")}

    def fake(name, result):
        def draw(*args, generator=None, device=None, **kwargs):
            if generator is not ELSEWHERE:
                return real[name](*args, generator=generator, device=device, **kwargs)
            _check_device(name, args[0].device if name == "multinomial" else device, generator)
            made.append(name)
            return result(*args)
        return draw

    monkeypatch.setattr(torch, "multinomial", fake("multinomial", lambda p, n: torch.zeros(p.shape[0], n).long()))
    monkeypatch.setattr(torch, "rand", fake("rand", lambda shape: torch.full(shape, 0.5)))
    monkeypatch.setattr(torch, "randperm", fake("randperm", lambda n: torch.arange(n)))
    monkeypatch.setattr(torch, "randint", fake("randint", lambda high, size: torch.zeros(size).long()))
    return made


def test_the_ltd_learning_head_draws_its_actions_on_the_generators_device(draws: list[str]) -> None:
    policy = LTDPolicy(depth_actor=(8,), depth_critic=(8,), size_actor=(8,), size_critic=(8,))
    runner = PhasePolicy(policy, Phase("depth", steps=1), ELSEWHERE)
    step = DraftStepInfo(depth=1, context_length=40, step_scores=torch.log(torch.tensor([0.7, 0.2, 0.1])),
                         config=policy.tree)
    runner.continue_drafting(step)
    assert draws == ["multinomial"] and policy.decisions[0].action == 0


def test_a_seeded_ltd_policy_draws_the_same_actions_as_before() -> None:
    """On one device the draw is torch.multinomial's with the generator, as it was."""
    policy = LTDPolicy(depth_actor=(8,), depth_critic=(8,), size_actor=(8,), size_critic=(8,))
    step = DraftStepInfo(depth=1, context_length=40, step_scores=torch.log(torch.tensor([0.7, 0.2, 0.1])),
                         config=policy.tree)
    PhasePolicy(policy, Phase("depth", steps=1), torch.Generator().manual_seed(3))
    for _ in range(20):
        policy.continue_drafting(step)
    probs = torch.softmax(policy(policy.decisions[0].observation[None], head="depth")[0].detach(), -1)
    generator = torch.Generator().manual_seed(3)
    expected = [int(torch.multinomial(probs, 1, generator=generator)) for _ in range(20)]
    assert [decision.action for decision in policy.decisions] == expected and len(set(expected)) == 2


def test_ppow_samples_its_windows_on_the_generators_device(draws: list[str]) -> None:
    target = tiny_model("llama")
    torch.manual_seed(1)
    draft = Eagle3DraftModel.from_target(target, initializer_range=0.2)
    verifier = WindowVerifier(target, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
    ids = prompt(10, seed=2)
    passed = verifier.conversations(ids, torch.ones_like(ids))
    cache = DynamicCache()
    first = first_draft_step(draft, ids, passed.features, cache)
    with torch.no_grad():
        windows = draft_windows(draft, first, cache, torch.tensor([[3]]), 2, 2, draft.d2t, generator=ELSEWHERE)
    assert windows.tokens.tolist() == [[[[0, 0], [0, 0]]]] and draws == ["multinomial", "multinomial"]


def test_ppow_draws_its_acceptance_test_on_the_generators_device(draws: list[str]) -> None:
    verdicts = WindowVerdicts(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 3, 2))
    assert accepted_prefix_lengths(verdicts, torch.zeros(2, 3), "sampling", ELSEWHERE).tolist() == [3, 3]
    assert draws == ["rand"]


def test_ppow_draws_its_prefixes_on_the_generators_device(draws: list[str]) -> None:
    valid = torch.ones(1, 6, dtype=torch.bool)
    assert select_prefixes(torch.zeros(1, 6), valid, 2, 0.0, ELSEWHERE).tolist() == [[0, 1]]
    assert select_prefixes(torch.zeros(1, 1), valid[:, :1], 2, 0.0, ELSEWHERE).tolist() == [[0, 0]]
    assert draws == ["randperm", "randint"]
