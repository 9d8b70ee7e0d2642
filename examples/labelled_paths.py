"""``LABEL=PATH`` arguments of the example scripts (``--curve``, ``--log``, ``--set``), split and checked once."""

from __future__ import annotations

import argparse
import os


def labelled_paths(parser: argparse.ArgumentParser, flag: str, specs: list[str],
                   what: str = "PATH") -> list[tuple[str, str]]:
    """Each ``LABEL=PATH`` given to ``flag``, as ``(label, path)``, in order. One without its label or its path stops
    the script with the parser's error naming the argument, before anything loads (a bare path was read as a label
    with an empty path, and failed later, or with another file's name)."""
    pairs = []
    for spec in specs:
        label, equals, path = spec.partition("=")
        if not (label and equals and path):
            parser.error(f"{flag} takes LABEL={what}, got {spec!r}")
        pairs.append((label, path))
    return pairs


def labelled_files(parser: argparse.ArgumentParser, flag: str, specs: list[str], what: str = "PATH",
                   hint: str = "") -> list[tuple[str, str]]:
    """:func:`labelled_paths` whose paths must name files: a missing one stops the script naming it (and ``hint``,
    where such files come from) before anything loads."""
    pairs = labelled_paths(parser, flag, specs, what)
    for label, path in pairs:
        if not os.path.isfile(path):
            parser.error(f"{flag} {label}={path}: no file {path!r}{hint}")
    return pairs
