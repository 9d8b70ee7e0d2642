"""Small networks shared by the learned policies."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import nn


def tanh_mlp(in_features: int, hidden: Sequence[int], out_features: int, out_gain: float) -> nn.Sequential:
    """Tanh MLP with Stable-Baselines3's ``MlpPolicy`` initialisation (orthogonal, gain √2 inside,
    ``out_gain`` on the output layer, zero biases), as LTD and Re-SpS use it."""
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
