"""``SpecTrainingArguments``: what every method's config checks on top of ``transformers.TrainingArguments``."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import TrainingArguments

from .warmup import check_warmup_length


@dataclass
class SpecTrainingArguments(TrainingArguments):
    """``TrainingArguments`` with the checks every method's config makes once ``TrainingArguments`` has set up the
    device: a warm-up as long as the run (:func:`~.warmup.check_warmup_length`) and a half precision the device
    would ignore (:func:`check_half_precision`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_warmup_length(self)
        check_half_precision(self)


def check_half_precision(args: TrainingArguments) -> None:
    """Refuse ``fp16`` where training runs on the CPU: accelerate applies fp16 mixed precision on accelerators only,
    so the run would train in float32 while ``training_config.json`` records ``fp16: true``."""
    if not args.fp16 or args.device.type != "cpu":
        return
    cause = "use_cpu=True, this config's default" if args.use_cpu else "no accelerator was found"
    raise ValueError(
        f"{type(args).__name__}: fp16=True trains on the CPU ({cause}), where accelerate ignores it: the run would "
        "train in float32 while training_config.json records fp16. Use bf16=True, the CPU's half precision, or "
        "train on an accelerator (use_cpu=False)."
    )


def check_no_mixed_precision(args: TrainingArguments, step: str) -> None:
    """Refuse ``bf16`` / ``fp16`` for a trainer whose own training step (``step`` says what it runs) replaces
    ``Trainer``'s: accelerate autocasts only the forwards of the model it prepared, so such a step would run in part
    in float32 and in part in half precision while ``training_config.json`` records the half precision."""
    half = [name for name in ("bf16", "fp16") if getattr(args, name)]
    if half:
        raise ValueError(
            f"{type(args).__name__}: {half[0]}=True would apply only in part: {step} outside the autocast accelerate "
            f"applies to the model's forward, so part of each step would run in float32 while training_config.json "
            f"records {half[0]}. Leave bf16 and fp16 unset (float32)."
        )
