"""The warm-up a configuration asks for, given as a share of the run (``warmup_ratio``).

transformers 5 dropped ``TrainingArguments.warmup_ratio``: its schedules read ``warmup_steps`` alone, which takes a
float below 1 as the share of the steps. The configurations here keep ``warmup_ratio`` (TRL's and the recipes' way to
say it), so it is carried into ``warmup_steps``; left there, a step-counted run would silently not warm up at all.
"""

from __future__ import annotations

import dataclasses

from transformers import TrainingArguments


def carry_warmup_ratio(config: TrainingArguments) -> None:
    """Set ``config.warmup_steps`` to its ``warmup_ratio`` (a share, as transformers reads a float below 1); refuse a
    ratio outside [0, 1) and a warm-up set both ways. The configuration's default ratio yields to a ``warmup_steps``
    given (it becomes 0): only a ratio other than the default conflicts with one."""
    ratio = config.warmup_ratio or 0.0
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"warmup_ratio is a share of the run, in [0, 1); got {ratio}.")
    if config.warmup_steps and ratio == _default_warmup_ratio(config):
        config.warmup_ratio = 0.0
        return
    if not ratio:
        return
    if config.warmup_steps:
        raise ValueError(
            f"warmup_ratio={ratio} and warmup_steps={config.warmup_steps} both set the warm-up. Keep one: "
            "warmup_ratio: 0 to count it in steps, or drop warmup_steps."
        )
    config.warmup_steps = ratio


def _default_warmup_ratio(config: TrainingArguments) -> float | None:
    """The ``warmup_ratio`` the configuration's class defaults to (None where it has no such field)."""
    field = next((f for f in dataclasses.fields(config) if f.name == "warmup_ratio"), None)
    return None if field is None or field.default is dataclasses.MISSING else field.default


def check_warmup_length(config: TrainingArguments) -> None:
    """Refuse, where the run's length is known (``max_steps > 0``), a warm-up of at least that many steps, as the
    schedule counts it (a ratio rounded up): the learning rate would never leave the warm-up, and a 1-step run's only
    step would run at 0 and change nothing."""
    if config.max_steps <= 0 or not config.warmup_steps:
        return
    steps = config.get_warmup_steps(config.max_steps)
    if steps < config.max_steps:
        return
    ratio = getattr(config, "warmup_ratio", None)
    name, value = ("warmup_ratio", ratio) if ratio else ("warmup_steps", config.warmup_steps)
    rounded = f" ({steps} step{'s' if steps > 1 else ''}, rounded up)" if ratio else ""
    raise ValueError(
        f"{name}={value}{rounded} warms up for the whole run of max_steps={config.max_steps}: the learning rate "
        "never reaches its peak, and the first step runs at 0 (a 1-step run trains nothing). Lower "
        f"{name} (0: no warm-up) to warm up for fewer steps than max_steps, or raise max_steps."
    )


def warmup_share(args: TrainingArguments) -> float:
    """The warm-up as a share of the run: ``warmup_steps`` below 1 (where :func:`carry_warmup_ratio` puts a ratio);
    one counted in whole steps has no share and is refused."""
    steps = args.warmup_steps or 0.0
    if steps >= 1:
        raise ValueError(
            f"warmup_steps={steps} counts the warm-up in steps, which a time budget cannot: give it as a share of "
            "the budget (warmup_ratio), or drop the budget."
        )
    return float(steps)
