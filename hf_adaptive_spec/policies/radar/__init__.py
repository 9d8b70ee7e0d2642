"""RADAR: an LSTM draft policy that decides after every draft step whether to keep drafting."""

from .policy import CONTINUE, SKIP, STOP, RadarPolicy, beam_scores, draft_calls, first_stop

__all__ = ["CONTINUE", "SKIP", "STOP", "RadarPolicy", "beam_scores", "draft_calls", "first_stop"]
