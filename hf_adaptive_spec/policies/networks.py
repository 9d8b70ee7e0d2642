"""Small networks shared by the learned policies, and their forward passes on the host for ``generate``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ..core.values import check_number, int_list


def hidden_widths(owner: str, name: str, widths: object) -> tuple[int, ...]:
    """``widths``, an MLP's hidden layer widths (``owner``'s setting ``name``): a sequence of ints >= 1 (a layer of
    width 0 makes the output a constant, whatever the input), refused naming the setting otherwise."""
    values = int_list(owner, name, widths, "hidden layer widths such as [128, 128]")
    for width in values:
        check_number(owner, f"each width of {name}", width, at_least=1, integer=True, meaning=f"of {values}")
    return tuple(values)


def tanh_mlp(in_features: int, hidden: Sequence[int], out_features: int, out_gain: float) -> nn.Sequential:
    """Tanh MLP with Stable-Baselines3's ``MlpPolicy`` initialisation (orthogonal, gain √2 inside,
    ``out_gain`` on the output layer, zero biases), as LTD and Re-SpS use it."""
    hidden = hidden_widths("tanh_mlp", "hidden", hidden)
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_features, width), nn.Tanh()]
        in_features = width
    layers.append(nn.Linear(in_features, out_features))
    for layer in layers:
        if isinstance(layer, nn.Linear):
            nn.init.orthogonal_(layer.weight, gain=out_gain if layer is layers[-1] else math.sqrt(2))
            nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


def host_array(tensor: torch.Tensor) -> np.ndarray:
    """A float32 numpy copy of ``tensor`` (a weight the host copy of a network keeps)."""
    return tensor.detach().float().cpu().numpy().copy()


class HostTanhMLP:
    """A :func:`tanh_mlp`'s forward for one observation, in numpy on the host (float32).

    A policy decides inside ``generate`` with one small observation at a time; in torch an MLP of three layers is a
    handful of tiny ops whose dispatch (with the CPU's thread pool around each) costs more than their arithmetic.
    The weights are copied once; :class:`HostDecisions` says when a policy copies them again.
    """

    def __init__(self, mlp: nn.Sequential):
        kinds = [type(layer) for layer in mlp]
        if kinds != [nn.Linear, nn.Tanh] * (len(mlp) // 2) + [nn.Linear]:
            names = [kind.__name__ for kind in kinds]
            raise ValueError(f"HostTanhMLP copies a tanh_mlp (Linear, Tanh, ..., Linear), got {names}.")
        linears = [layer for layer in mlp if isinstance(layer, nn.Linear)]
        self.layers = [(host_array(layer.weight), host_array(layer.bias)) for layer in linears]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``[in]`` -> ``[out]``."""
        *hidden, (weight, bias) = self.layers
        for inner_weight, inner_bias in hidden:
            x = np.tanh(inner_weight @ x + inner_bias)
        return weight @ x + bias


class HostDecisions:
    """A policy whose eval-mode decisions inside ``generate`` run on a host copy of its weights (``_copy_to_host``).

    The copy is made at every generation's start (``begin_generation``: the engine's call and each replayed
    prompt), dropped at every ``train()`` / ``eval()`` switch (a trainer's rollout begins with one) and made at the
    first decision where it is missing, so no decision runs stale weights. It is remade rather than checked: an
    optimiser's step need not bump the parameters' version counters, nor does a ``.data`` assignment.
    """

    _host = None

    def _copy_to_host(self):
        raise NotImplementedError

    def begin_generation(self) -> None:
        self._host = self._copy_to_host()

    def host(self):
        """The host copy of the weights, made now if missing."""
        if self._host is None:
            self._host = self._copy_to_host()
        return self._host

    def train(self, mode: bool = True):
        self._host = None
        return super().train(mode)
