"""Trainers for drafters and policies (TRL conventions: a config dataclass + a Trainer subclass
per method, scripts in the repository's ``trainers/`` folder)."""
