"""The tree speculation engine behind ``model.generate``."""

from .enable import enable
from .statistics import SpeculationStats, SpeculativeDecoderOnlyOutput

__all__ = ["SpeculationStats", "SpeculativeDecoderOnlyOutput", "enable"]
