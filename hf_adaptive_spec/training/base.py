"""What every trainer of this project shares (TRL conventions, without TRL's LM-only base)."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable

from transformers import Trainer
from trl import TrlParser


class SpecTrainer(Trainer):
    """A ``Trainer`` that averages per-step metrics into each log line (TRL's ``_metrics``
    pattern) and saves its arguments as ``training_config.json`` (never a pickle)."""

    _tag_names: list[str] = ["hf-adaptive-spec", "speculative-decoding"]

    def __init__(self, *args, **kwargs):
        self._metrics: dict[str, list[float]] = defaultdict(list)
        super().__init__(*args, **kwargs)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        prefix = "eval_" if any(key.startswith("eval_") for key in logs) else ""
        logs.update({prefix + key: sum(values) / len(values) for key, values in self._metrics.items() if values})
        self._metrics.clear()
        super().log(logs, start_time)

    def train_save_and_push(self) -> None:
        """What every training script ends with: train (resuming if asked), save, push if asked."""
        self.train(resume_from_checkpoint=self.args.resume_from_checkpoint)
        self.save_model(self.args.output_dir)
        if self.args.push_to_hub:
            self.push_to_hub()

    def save_training_config(self, output_dir: str) -> None:
        """Write the training arguments as JSON (``Trainer`` would pickle ``training_args.bin``)."""
        with open(os.path.join(output_dir, "training_config.json"), "w", encoding="utf-8") as handle:
            handle.write(self.args.to_json_string())


def run_training_script(parser: TrlParser, main: Callable, argv: list[str] | None) -> int:
    """What every ``trainers/<method>.py`` does: parse ``argv`` (YAML via ``--config``), call ``main(script_args, training_args)``."""
    script_args, training_args = parser.parse_args_and_config(args=argv)
    main(script_args, training_args)
    return 0
