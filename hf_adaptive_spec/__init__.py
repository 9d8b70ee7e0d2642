"""hf-adaptive-spec: lossless, adaptive tree speculative decoding for transformers' ``generate``.

>>> import hf_adaptive_spec as hfas
>>> model, tokenizer = hfas.load_default_model()
>>> hfas.enable(model)
>>> drafter = hfas.CausalLMDrafter.from_target_layers(model, num_layers=8)
>>> out = model.generate(**inputs, assistant_model=drafter, assistant_policy=hfas.StaticTreePolicy())
"""

from .checkpoints import shipped_checkpoint
from .default_model import load_default_model
from .drafters import (
    CausalLMDrafter, DVIDrafter, DVIOnlineLearnerConfig, DraftContext, DraftOutcome, Drafter, Eagle3DrafterConfig, Eagle3DraftModel,
    Eagle3Drafter, SharedCacheVerification, truncated_causal_lm,
)
from .core import DraftTree
from .profiling import recommended_buckets, recommended_generate_kwargs, recommended_lookup_tokens, recommended_policy
from .generation import SpeculationStats, SpeculativeDecoderOnlyOutput, enable, fast_path, fast_path_compile_config
from .policies import (
    AutoDraftPolicy,
    ConfidenceThresholdPolicy,
    CycleFeedback,
    CycleState,
    DraftPolicy,
    DraftStepInfo,
    HeuristicLengthPolicy,
    LTDPolicy,
    LookupFirstPolicy,
    RadarPolicy,
    ReSpSPolicy,
    StaticTreePolicy,
    TreeConfig,
    VerifySizeInfo,
)

__version__ = "0.1.0"

__all__ = [
    "recommended_buckets",
    "recommended_generate_kwargs",
    "recommended_lookup_tokens",
    "recommended_policy",
    "AutoDraftPolicy",
    "CausalLMDrafter",
    "CycleFeedback",
    "CycleState",
    "DVIDrafter",
    "DVIOnlineLearnerConfig",
    "DraftContext",
    "DraftOutcome",
    "DraftPolicy",
    "DraftStepInfo",
    "DraftTree",
    "Drafter",
    "SharedCacheVerification",
    "Eagle3DrafterConfig",
    "Eagle3DraftModel",
    "Eagle3Drafter",
    "LTDPolicy",
    "LookupFirstPolicy",
    "RadarPolicy",
    "ReSpSPolicy",
    "SpeculationStats",
    "SpeculativeDecoderOnlyOutput",
    "StaticTreePolicy",
    "ConfidenceThresholdPolicy",
    "HeuristicLengthPolicy",
    "TreeConfig",
    "VerifySizeInfo",
    "enable",
    "fast_path",
    "fast_path_compile_config",
    "load_default_model",
    "shipped_checkpoint",
    "truncated_causal_lm",
]
