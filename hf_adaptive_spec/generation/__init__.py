"""The tree speculation engine behind ``model.generate``."""

from .enable import enable
from .statistics import SpeculationStats, SpeculativeDecoderOnlyOutput
from .static_path import fast_path, fast_path_compile_config

__all__ = ["SpeculationStats", "SpeculativeDecoderOnlyOutput", "enable", "fast_path", "fast_path_compile_config"]
