"""RADAR training: the acceptance-length dataset, config and offline REINFORCE trainer."""

from .config import RadarConfig
from .data import RadarDataset, build_radar_dataset
from .trainer import LatencyModel, RadarTrainer, held_out_metrics, return_matrix, speed_matrix

__all__ = [
    "LatencyModel",
    "RadarConfig",
    "RadarDataset",
    "RadarTrainer",
    "build_radar_dataset",
    "held_out_metrics",
    "return_matrix",
    "speed_matrix",
]
