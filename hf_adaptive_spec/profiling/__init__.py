"""Hardware cost profiles (``hf-adaptive-spec profile``)."""

from .hardware import HardwareProfile, measure_in_generate, measure_verification

__all__ = ["HardwareProfile", "measure_in_generate", "measure_verification"]
