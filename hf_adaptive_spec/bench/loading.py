"""Load the model under test: the embedded default model or ``--model PATH_OR_ID``."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from .. import default_model
from .errors import BenchError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_model(
    name_or_path: str | None, dtype: str, device: torch.device
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` in eval mode on ``device``; the default model when ``name_or_path`` is None.

    Raises:
        BenchError: when the model cannot be loaded or its tokenizer has no chat template.
    """
    try:
        model, tokenizer = default_model.load_model(name_or_path, DTYPES[dtype])
    except (OSError, ImportError) as error:
        raise BenchError(f"cannot load model {name_or_path or 'default'}: {error}") from error
    if not tokenizer.chat_template:
        raise BenchError(f"the tokenizer of {name_or_path} has no chat template (needed for multi-turn prompts)")
    return model.to(device).eval(), tokenizer
