"""The local files a training script reads, checked before any model loads.

A recipe names data that is often derived (``cat`` of committed files, a regeneration's output) and written down in
the recipe's header as the commands that build it. A run whose input is missing failed after loading the target with
Python's bare ``FileNotFoundError``; :func:`check_local_inputs` refuses it first, names the argument and the path, and
quotes the recipe's command that builds it.

A script's arguments class names its local inputs in ``local_inputs`` (a class attribute: a file or folder that must
exist, or a list of them, wherever the argument is set), and in ``local_input_files`` those of them that must be files
(a folder there failed after the target loaded, as a bare ``IsADirectoryError``). Arguments that may name a Hub
repository are not in it.
"""

from __future__ import annotations

import re
from pathlib import Path


def missing_local_inputs(script_args) -> list[tuple[str, str]]:
    """``(argument, path)`` of every path of ``script_args``' ``local_inputs`` that does not exist."""
    return [(name, path) for name, path in _local_inputs(script_args) if not Path(path).exists()]


def folders_for_files(script_args) -> list[tuple[str, str]]:
    """``(argument, path)`` of every path of ``script_args``' ``local_input_files`` that names a folder."""
    files = getattr(script_args, "local_input_files", ())
    return [(name, path) for name, path in _local_inputs(script_args) if name in files and Path(path).is_dir()]


def _local_inputs(script_args) -> list[tuple[str, str]]:
    """``(argument, path)`` of every path ``script_args``' ``local_inputs`` set."""
    return [
        (name, path)
        for name in getattr(script_args, "local_inputs", ())
        for value in [getattr(script_args, name)]
        for path in ([] if value is None else [value] if isinstance(value, str) else value)
    ]


def split_config(argv: list[str]) -> tuple[str | None, list[str]]:
    """A script's command line as its ``--config FILE`` (None without one) and the other arguments, in order."""
    config, others, arguments = None, [], iter(argv)
    for arg in arguments:
        if arg == "--config":
            config = next(arguments, None)
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
        else:
            others.append(arg)
    return config, others


def building_command(recipe: str, path: str) -> str | None:
    """The command in ``recipe``'s comment lines that writes ``path`` (``... > path``, with the lines its trailing
    backslashes continue), or None."""
    lines = [line.lstrip("#").strip() for line in Path(recipe).read_text(encoding="utf-8").splitlines()
             if line.startswith("#")]
    writes = re.compile(r">\s*" + re.escape(path) + r"(\s|$|;|\))")
    for end, line in enumerate(lines):
        if writes.search(line):
            start = end
            while start > 0 and lines[start - 1].endswith("\\"):
                start -= 1
            return "\n".join(lines[start : end + 1])
    return None


def building_commands(recipe: str, path: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """The recipe's commands that build ``path``, after those that build the missing files it reads (a ``.jsonl``
    its command names that does not exist and that the header builds too): the order to run them in."""
    command = building_command(recipe, path)
    if command is None:
        return []
    before = []
    for read in dict.fromkeys(re.findall(r"[\w./-]+\.jsonl", command)):
        if read != path and read not in seen and not Path(read).exists():
            before += [c for c in building_commands(recipe, read, seen | {path}) if c not in before]
    return before + [command]


def check_local_inputs(script_args, argv: list[str]) -> None:
    """Refuse a run whose ``local_inputs`` do not all exist, naming each, with the recipe's commands that build it
    where its header holds them, and one whose ``local_input_files`` name a folder."""
    folders = folders_for_files(script_args)
    if folders:
        raise IsADirectoryError(
            "This run reads files that are folders:\n"
            + "\n".join(f"- {name}: {path!r} is a folder, and it names a file" for name, path in folders)
            + "\nPass the file itself."
        )
    missing = missing_local_inputs(script_args)
    if not missing:
        return
    recipe, _ = split_config(argv)
    recipe = recipe if recipe and Path(recipe).is_file() else None
    lines = []
    for name, path in missing:
        commands = building_commands(recipe, path) if recipe else []
        lines.append(f"- {name}: no file or folder {path!r}")
        if commands:
            lines[-1] += "; the recipe's header builds it with:"
            lines += ["    " + line for command in commands for line in command.splitlines()]
    raise FileNotFoundError(
        "This run reads local inputs that do not exist:\n" + "\n".join(lines)
        + "\nBuild them first (derived files: artifacts/README.md), or pass the paths that hold them."
    )
