"""DVI training: config and trainer (one pass of the online loop over a prompt stream)."""

from .config import DVIConfig
from .trainer import DVITrainer, collate_prompts

__all__ = ["DVIConfig", "DVITrainer", "collate_prompts"]
