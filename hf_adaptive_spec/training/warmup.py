"""The warm-up a configuration asks for, given as a share of the run (``warmup_ratio``).

transformers 5 dropped ``TrainingArguments.warmup_ratio``: its schedules read ``warmup_steps`` alone, which takes a
float below 1 as the share of the steps. The configurations here keep ``warmup_ratio`` (TRL's and the recipes' way to
say it), so it is carried into ``warmup_steps``; left there, a step-counted run would silently not warm up at all.
"""

from __future__ import annotations

from transformers import TrainingArguments


def carry_warmup_ratio(config: TrainingArguments) -> None:
    """Set ``config.warmup_steps`` to its ``warmup_ratio`` (a share, as transformers reads a float below 1); refuse a
    ratio outside [0, 1) and a warm-up set both ways."""
    ratio = config.warmup_ratio or 0.0
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"warmup_ratio is a share of the run, in [0, 1); got {ratio}.")
    if not ratio:
        return
    if config.warmup_steps:
        raise ValueError(
            f"warmup_ratio={ratio} and warmup_steps={config.warmup_steps} both set the warm-up. Keep one: "
            "warmup_ratio: 0 to count it in steps, or drop warmup_steps."
        )
    config.warmup_steps = ratio


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
