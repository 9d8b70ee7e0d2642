"""The levels a training script logs at: ``--log_level`` for this package's loggers and transformers', from the
script's start, and put back when it returns."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from transformers import TrainingArguments
from transformers.utils import logging as transformers_logging


def configure_logging(training_args: TrainingArguments) -> None:
    """Show this package's messages, and transformers', at the level ``--log_level`` asks from the start of a script.
    transformers' ``Trainer`` sets only its own library's level, once it is built; this package's loggers are not
    under it, so their ``info`` (a continued schedule, a widened drafter) were never shown. A stderr handler is added
    only when logging has none (a script run from the command line), so an application's own handlers are kept.
    Under ``passive`` (the default) both levels are left as they are, as the Trainer leaves them: a script used as a
    library keeps the application's ``logging.basicConfig(level=...)``."""
    if asked_log_level(training_args) == "passive":
        return
    level = training_args.get_process_log_level()
    transformers_logging.set_verbosity(level)
    package = logging.getLogger(__name__.split(".")[0])
    package.setLevel(level)
    if not package.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        package.addHandler(handler)


@dataclass(frozen=True)
class LoggingState:
    """The package logger's level and handlers and transformers' verbosity, as :func:`configure_logging` and the
    ``Trainer`` change them, to be put back when a script returns."""

    package_level: int
    package_handlers: tuple[logging.Handler, ...]
    transformers_verbosity: int

    @classmethod
    def now(cls) -> LoggingState:
        package = logging.getLogger(__name__.split(".")[0])
        return cls(package.level, tuple(package.handlers), transformers_logging.get_verbosity())

    def restore(self) -> None:
        package = logging.getLogger(__name__.split(".")[0])
        package.setLevel(self.package_level)
        for handler in [h for h in package.handlers if h not in self.package_handlers]:
            package.removeHandler(handler)
        for handler in self.package_handlers:
            if handler not in package.handlers:
                package.addHandler(handler)
        transformers_logging.set_verbosity(self.transformers_verbosity)


def asked_log_level(training_args: TrainingArguments) -> str:
    """The level this process was asked for: ``--log_level`` on the main process, ``--log_level_replica`` on the
    others (the choice ``TrainingArguments.get_process_log_level`` makes)."""
    return training_args.log_level if training_args.should_log else training_args.log_level_replica
