"""Training or evaluation mode of the caller's modules: what decoding needs of them, and leaving them as they were.

Decoding runs a model's forwards with its key/value cache and without dropout. A target or draft model left in
training mode is the caller's to switch (``model.eval()``); the engine and the drafters never switch a module the
caller owns, and switch only the modules they build themselves.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn
from transformers.utils import logging

logger = logging.get_logger(__name__)


def check_inference_mode(model: nn.Module, role: str) -> None:
    """Refuse a ``model`` in training mode with gradient checkpointing (transformers then drops its key/value cache,
    which tree verification and drafting read), and warn once about one in training mode (any dropout makes every
    forward another draw, so its tokens follow no fixed model). ``role`` names it ("target model", "draft model")."""
    if not model.training:
        return
    checkpointing = getattr(model, "is_activation_checkpointing", None)  # transformers 5.x's name, then the old one
    if checkpointing if checkpointing is not None else getattr(model, "is_gradient_checkpointing", False):
        raise ValueError(
            f"The {role} ({type(model).__name__}) is in training mode with gradient checkpointing, where transformers "
            "runs it without its key/value cache, which speculative decoding reads: call model.eval() before "
            "generate (or model.gradient_checkpointing_disable())."
        )
    logger.warning_once(
        f"The {role} ({type(model).__name__}) is in training mode: any dropout it has makes every forward another "
        "draw, so the tokens follow no fixed model (stock's would not repeat either). Call model.eval() before "
        "generate."
    )


def eval_except(module: nn.Module, shared: Iterable[nn.Module]) -> nn.Module:
    """``module`` with the submodules it built itself in evaluation mode, and those it shares with the caller
    (``shared`` and their submodules: a target's layers, norm and head) in whatever mode the caller left them:
    ``module.eval()`` would switch the caller's modules too."""
    owned_by_caller = {id(sub) for part in shared for sub in part.modules()}
    for sub in module.modules():
        if id(sub) not in owned_by_caller:
            sub.training = False
    return module
