"""Where a random draw runs: on its generator's device, the result moved back to the tensors it serves.

The trainers seed a CPU ``torch.Generator`` (reproducible whatever the accelerator), and ``torch.multinomial``,
``torch.rand``, ``torch.randperm`` and ``torch.randint`` refuse a generator of another device than the one they draw
on (a policy trained on a GPU raised "Expected a 'cuda' device type for generator but found 'cpu'"). So a draw runs
on :func:`draw_device` and its result goes back with ``.to(tensor.device)``."""

from __future__ import annotations

import torch


def draw_device(generator: torch.Generator | None, like: torch.Tensor | None = None) -> torch.device | None:
    """The device to draw on: ``generator``'s when given, else ``like``'s (None without ``like``: torch's default
    device, where the global generator draws)."""
    if generator is not None:
        return generator.device
    return None if like is None else like.device


def multinomial_on_generator_device(probs: torch.Tensor, generator: torch.Generator | None) -> torch.LongTensor:
    """One index per row of ``probs`` ``[N, K]``, drawn with ``generator`` (torch's global one when None) on
    :func:`draw_device` and returned on ``probs``'s device."""
    return torch.multinomial(probs.to(draw_device(generator, probs)), 1, generator=generator)[:, 0].to(probs.device)
