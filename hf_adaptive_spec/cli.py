"""``hf-adaptive-spec <command> ...``: dispatches to each command's ``main(argv)``.

A command is a module with ``main(argv: list[str] | None) -> int``; add one to ``COMMANDS``.
"""

from __future__ import annotations

import importlib
import sys

from .core.dispatch import help_or_refusal

COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("hf_adaptive_spec.bench.cli", "Spec-Bench protocol: speedup, τ and identity check per method."),
    "profile": ("hf_adaptive_spec.profiling.cli", "Measure verification / draft / policy costs on this machine."),
    "train": ("hf_adaptive_spec.training.cli", "Train a drafter or policy: train METHOD --config recipe.yaml."),
    "record": (
        "hf_adaptive_spec.environments.cli",
        "Record greedy generations of training prompts for policy replay (exact for greedy decoding).",
    ),
    "packages": (
        "hf_adaptive_spec.generation.packages_cli",
        "List the fast path's ahead-of-time packages on disk; delete those unused for N days.",
    ),
}


def main(argv: list[str] | None = None) -> int:
    """Run ``hf-adaptive-spec COMMAND [ARGS...]`` (``argv`` defaults to ``sys.argv[1:]``)."""
    argv = sys.argv[1:] if argv is None else argv
    listing = "\n".join(f"  {name:<10} {summary}" for name, (_, summary) in COMMANDS.items())
    usage = f"usage: hf-adaptive-spec COMMAND [ARGS...]\n\ncommands:\n{listing}"
    status = help_or_refusal(argv, "hf-adaptive-spec", usage, list(COMMANDS))
    if status is not None:
        return status
    module, _ = COMMANDS[argv[0]]
    return importlib.import_module(module).main(argv[1:])

