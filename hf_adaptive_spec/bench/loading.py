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
    model, tokenizer = default_model.load_chat_model_for_option(
        name_or_path, DTYPES[dtype], "the bench prompts it with each question's chat turns", BenchError
    )
    return model.to(device).eval(), tokenizer
