"""Comma-separated sizes of the example scripts (``--slots``, ``--sizes``), parsed and checked once."""

from __future__ import annotations

import argparse


def positive_ints(text: str) -> list[int]:
    """``"512,1024"`` -> ``[512, 1024]``, an argparse ``type``: the parser refuses, naming the flag, anything but
    comma-separated whole numbers of at least 1 (a bad one stopped in a bare ValueError after the models had
    loaded)."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers of at least 1 (e.g. 512,1024), "
                                         f"got {text!r}")
    return values
