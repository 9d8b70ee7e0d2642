"""EAGLE-3 drafter training: config, trainer, training-time-test loss and data helpers."""

from .config import Eagle3Config
from .data import (
    ConversationStream,
    build_draft_vocabulary,
    collate,
    load_samples,
    padding_id,
    read_conversations,
    tokenize_conversation,
)
from .features import TargetFeatures
from .trainer import Eagle3Trainer
from .ttt import TTTBatch, TTTStep, ttt_loss, ttt_unroll

__all__ = [
    "ConversationStream",
    "Eagle3Config",
    "Eagle3Trainer",
    "TTTBatch",
    "TTTStep",
    "TargetFeatures",
    "build_draft_vocabulary",
    "collate",
    "load_samples",
    "padding_id",
    "read_conversations",
    "tokenize_conversation",
    "ttt_loss",
    "ttt_unroll",
]
