"""hf-adaptive-spec: lossless, adaptive tree speculative decoding for transformers' ``generate``.

>>> import hf_adaptive_spec as hfas
>>> model, tokenizer = hfas.load_default_model()
>>> hfas.enable(model)
>>> drafter = hfas.CausalLMDrafter.from_target_layers(model, num_layers=8)
>>> out = model.generate(**inputs, assistant_model=drafter, assistant_policy=hfas.StaticTreePolicy())
"""

from .checkpoints import shipped_checkpoint
from .core import DraftTree
from .default_model import load_default_model
from .drafters import (
    CausalLMDrafter,
    DraftContext,
    Drafter,
    DraftOutcome,
    DVIDrafter,
    DVIOnlineLearnerConfig,
    Eagle3Drafter,
    Eagle3DrafterConfig,
    Eagle3DraftModel,
    SharedCacheVerification,
    truncated_causal_lm,
)
from .generation import SpeculationStats, SpeculativeDecoderOnlyOutput, enable, fast_path, fast_path_compile_config
from .policies import (
    AutoDraftPolicy,
    ConfidenceThresholdPolicy,
    CycleFeedback,
    CycleState,
    DraftPolicy,
    DraftStepInfo,
    HeuristicLengthPolicy,
    LookupFirstPolicy,
    LTDPolicy,
    RadarPolicy,
    ReSpSPolicy,
    StaticTreePolicy,
    TreeConfig,
    VerifySizeInfo,
)
from .profiling import recommended_buckets, recommended_generate_kwargs, recommended_lookup_tokens, recommended_policy

__version__ = "0.1.0"

__all__ = [
    "AutoDraftPolicy",
    "CausalLMDrafter",
    "ConfidenceThresholdPolicy",
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
    "Eagle3DraftModel",
    "Eagle3Drafter",
    "Eagle3DrafterConfig",
    "HeuristicLengthPolicy",
    "LTDPolicy",
    "LookupFirstPolicy",
    "RadarPolicy",
    "ReSpSPolicy",
    "SharedCacheVerification",
    "SpeculationStats",
    "SpeculativeDecoderOnlyOutput",
    "StaticTreePolicy",
    "TreeConfig",
    "VerifySizeInfo",
    "enable",
    "fast_path",
    "fast_path_compile_config",
    "load_default_model",
    "recommended_buckets",
    "recommended_generate_kwargs",
    "recommended_lookup_tokens",
    "recommended_policy",
    "shipped_checkpoint",
    "truncated_causal_lm",
]
