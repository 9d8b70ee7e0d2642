"""Commands that dispatch on their first argument (``hf-adaptive-spec COMMAND``, ``hf-adaptive-spec train METHOD``)."""

from __future__ import annotations

import sys


def help_or_refusal(argv: list[str], prog: str, usage: str, names: list[str], what: str = "command") -> int | None:
    """None when ``argv`` starts with one of ``names`` (a ``what``: a command, a trainer); else the exit status after
    printing ``usage`` on stdout for ``-h``/``--help`` (0), or on stderr with what is wrong (2): an unknown name was
    never named, and help went to stderr."""
    if argv and argv[0] in names:
        return None
    if argv[:1] in (["-h"], ["--help"]):
        print(usage)
        return 0
    problem = f"unknown {what} {argv[0]!r}" if argv else f"no {what} given"
    print(f"{usage}\n{prog}: error: {problem}; choose one of {', '.join(names)}", file=sys.stderr)
    return 2
