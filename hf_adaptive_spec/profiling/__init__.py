"""Hardware cost profiles (``hf-adaptive-spec profile``) and the policy a profile recommends."""

from .hardware import HardwareProfile
from .measure import (
    measure_buckets_in_generate,
    measure_catch_up_in_generate,
    measure_in_generate,
    measure_verification,
)
from .recommendation import (
    default_profile_path,
    recommended_buckets,
    recommended_generate_kwargs,
    recommended_lookup_tokens,
    recommended_policy,
    recommended_tree,
)

__all__ = [
    "HardwareProfile",
    "default_profile_path",
    "measure_buckets_in_generate",
    "measure_catch_up_in_generate",
    "measure_in_generate",
    "measure_verification",
    "recommended_buckets",
    "recommended_generate_kwargs",
    "recommended_lookup_tokens",
    "recommended_policy",
    "recommended_tree",
]
