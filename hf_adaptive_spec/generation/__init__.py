"""The tree speculation engine behind ``model.generate``."""

from .enable import enable
from .static_path import fast_path, fast_path_compile_config
from .statistics import SpeculationStats, SpeculativeDecoderOnlyOutput

__all__ = ["SpeculationStats", "SpeculativeDecoderOnlyOutput", "enable", "fast_path", "fast_path_compile_config"]
