"""EAGLE-3 drafter training: config, trainer, training-time-test loss and data helpers."""

from .config import Eagle3Config
from .curve import (
    HeldOutCurveCallback,
    HeldOutPoint,
    drafter_shape,
    read_curve,
    write_curve,
)
from .data import (
    ConversationStream,
    build_draft_vocabulary,
    collate,
    load_samples,
    padding_id,
    read_conversations,
    tokenize_conversation,
)
from .feature_cache import FeatureCache, target_signature
from .features import TargetFeatures
from .heldout import (
    HeldOutSet,
    chain_accepted,
    chain_lengths,
    decoding_walk,
    without_training_prompts,
)
from .initialization import INITIALIZATIONS, copy_target_layer, deepen, initialize_drafter, widen_mlp, widen_vocabulary
from .lineage import (
    TRAINED_PROMPTS_FILE,
    Lineage,
    lineage_before,
    opening_prompt,
    prompt_digest,
    read_lineage,
    write_lineage,
)
from .trainer import Eagle3Trainer
from .ttt import TTTBatch, TTTStep, ttt_loss, ttt_unroll

__all__ = [
    "INITIALIZATIONS",
    "TRAINED_PROMPTS_FILE",
    "ConversationStream",
    "Eagle3Config",
    "Eagle3Trainer",
    "FeatureCache",
    "HeldOutCurveCallback",
    "HeldOutPoint",
    "HeldOutSet",
    "Lineage",
    "TTTBatch",
    "TTTStep",
    "TargetFeatures",
    "build_draft_vocabulary",
    "chain_accepted",
    "chain_lengths",
    "collate",
    "copy_target_layer",
    "decoding_walk",
    "deepen",
    "drafter_shape",
    "initialize_drafter",
    "lineage_before",
    "load_samples",
    "opening_prompt",
    "padding_id",
    "prompt_digest",
    "read_conversations",
    "read_curve",
    "read_lineage",
    "target_signature",
    "tokenize_conversation",
    "ttt_loss",
    "ttt_unroll",
    "widen_mlp",
    "widen_vocabulary",
    "without_training_prompts",
    "write_curve",
    "write_lineage",
]
