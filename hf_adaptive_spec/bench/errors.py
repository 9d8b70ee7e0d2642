"""Errors the benchmark reports to the user as one line (no traceback)."""


class BenchError(Exception):
    """A usage or setup problem: bad option, missing file or artifact, stale progress file."""


class UnknownMethodError(BenchError):
    """A ``--methods`` entry names no registered method."""


class MethodUnavailableError(BenchError):
    """A method exists, but an artifact it needs (engine API, checkpoint) is missing."""
