"""The draft-length knobs transformers reads from the *assistant's* ``generation_config``."""

from __future__ import annotations

from transformers import GenerationConfig

from ..arguments import MethodOptions

#: the options :func:`apply_assistant_knobs` reads
ASSISTANT_KNOBS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


def apply_assistant_knobs(generation_config: GenerationConfig, options: MethodOptions) -> None:
    """Set the options given (not None) on ``generation_config``; unset ones keep transformers' defaults.

    Passing these knobs to ``generate`` has no effect: the assisted candidate generator reads
    them from the assistant model's ``generation_config`` (the target itself for early exit).
    """
    for key in ASSISTANT_KNOBS:
        value = getattr(options, key)
        if value is not None:
            setattr(generation_config, key, value)
