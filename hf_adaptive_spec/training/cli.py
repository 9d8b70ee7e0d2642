"""``hf-adaptive-spec train METHOD --config recipe.yaml``: run a trainer's script."""

from __future__ import annotations

import importlib
import sys

from ..core.dispatch import help_or_refusal

#: method name -> module with ``run(argv) -> int`` (the same code as ``trainers/<method>.py``).
TRAINERS = {
    "eagle3": "hf_adaptive_spec.training.eagle3.script",
    "ppow": "hf_adaptive_spec.training.ppow.script",
    "dvi": "hf_adaptive_spec.training.dvi.script",
    "ltd": "hf_adaptive_spec.training.ltd.script",
    "radar": "hf_adaptive_spec.training.radar.script",
    "resps": "hf_adaptive_spec.training.resps.script",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    usage = f"usage: hf-adaptive-spec train {{{','.join(TRAINERS)}}} --config recipe.yaml [--field value ...]"
    status = help_or_refusal(argv, "hf-adaptive-spec train", usage, list(TRAINERS), what="trainer")
    if status is not None:
        return status
    return importlib.import_module(TRAINERS[argv[0]]).run(argv[1:])
