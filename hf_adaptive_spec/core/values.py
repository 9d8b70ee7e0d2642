"""Checks of user-given settings, one rule each: a flag is a bool, a number is a real number in its range.

Python takes any truthy value for an on/off option, so ``sample_drafts="no"`` (or ``"false"`` in a
``config.json``) would turn the option on; and a NaN passes every ``value < 0`` check, which is how a
range is usually written. These checks refuse both, naming the setting and what it takes.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable


def check_flag(owner: str, name: str, value: object) -> bool:
    """``value`` of the on/off setting ``owner``'s ``name``, refused unless it is True or False."""
    if not isinstance(value, bool):
        raise ValueError(
            f"{owner}: {name} must be True or False, got {value!r} (a string such as 'no' would count as true): "
            "pass a bool (true or false in a config.json)."
        )
    return value


def check_number(
    owner: str,
    name: str,
    value: object,
    *,
    at_least: float | None = None,
    above: float | None = None,
    at_most: float | None = None,
    below: float | None = None,
    integer: bool = False,
    meaning: str = "",
) -> float:
    """``value`` of ``owner``'s setting ``name``, refused unless it is a number (an int with ``integer``; never a
    bool, never NaN) within the bounds given: ``at_least <= value``, ``above < value``, ``value <= at_most``,
    ``value < below``. ``meaning`` says what the setting does, for the message."""
    kind = numbers.Integral if integer else numbers.Real
    in_range = (
        isinstance(value, kind) and not isinstance(value, bool) and not math.isnan(value)
        and (at_least is None or value >= at_least) and (above is None or value > above)
        and (at_most is None or value <= at_most) and (below is None or value < below)
    )
    if not in_range:
        bounds = [f">= {at_least}" if at_least is not None else "", f"> {above}" if above is not None else "",
                  f"<= {at_most}" if at_most is not None else "", f"< {below}" if below is not None else ""]
        wanted = " and ".join(bound for bound in bounds if bound)
        kind_name = "an int" if integer else "a number"
        what = f"{kind_name}{' ' + wanted if wanted else ''}{'' if integer else ', not NaN'}"
        raise ValueError(f"{owner}: {name} must be {what}{f' ({meaning})' if meaning else ''}, got {value!r}.")
    return value


def int_list(owner: str, name: str, values: object, what: str) -> list:
    """:func:`plain_ints` of ``owner``'s list setting ``name``, refused, naming ``what`` it lists (with an example),
    when it is no list at all: a number, a string or null where a list belongs (a ``config.json``'s
    ``"size_choices": 3``) would otherwise fail as a bare ``TypeError``, or be read character by character."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{owner}: {name} must be a list of {what}, got {values!r}.")
    return plain_ints(values)


def plain_ints(values: Iterable) -> list:
    """``values`` as a list, integers of any kind (numpy's, a tensor's integer elements) as Python ints and the rest
    left as they are, for the checks to refuse (never rounded: ``int(6.9)`` would be 6)."""
    return [_as_int(value) for value in values]


def _as_int(value: object) -> object:
    if isinstance(value, bool):
        return value
    try:
        return operator.index(value)  # what Python takes as an index: ints of every kind, not 6.9
    except TypeError:
        return value
