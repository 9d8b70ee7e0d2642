"""RADAR: an LSTM draft policy that decides after every draft step whether to keep drafting."""

from .policy import CONTINUE, STOP, RadarPolicy, beam_scores, first_stop

__all__ = ["CONTINUE", "STOP", "RadarPolicy", "beam_scores", "first_stop"]
