"""The ``profile`` command's arguments, checked before anything loads or is timed: sizes, devices, prompt-lookup
lengths, buckets and cache slots that would fail inside torch minutes later or be ignored, where the profile is written
(and what it would replace), and the timing options ``--rerank`` would ignore."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ..bench.report import is_bench_report
from ..core.files import folder_write_problem
from ..default_model import resolve_device
from ..environments.static_grid import lookup_counts_from_text
from ..generation.static_path import DEFAULT_BUCKETS, buckets_from_text
from .recommendation import PROFILE_ENV, default_profile_path

#: tokens each ``generate`` call of the in-generate timings (draft steps, catch-up) generates; the static cache is
#: sized for them, which holds the bucket rotation's calls too
BUCKET_RUN_TOKENS = 128
#: the fewest tokens the largest ``--buckets`` must hold: a draft level after the first is timed inside ``generate``
#: on trees of two levels (the root and two drafted tokens), which a smaller largest bucket caps to one level
FEWEST_LARGEST_BUCKET = 3
#: what a profile is timed with: ``--rerank`` times nothing and ranks on the costs the profile holds
TIMING_FLAGS = ("--model", "--dtype", "--device", "--num-threads", "--context-length", "--verify-tokens", "--repeats",
                "--eagle3", "--drafter-layers", "--static", "--compile", "--cache-slots", "--buckets")


def check_sizes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before anything loads, sizes, prompt-lookup lengths and a ``--device`` that would fail inside torch
    minutes later or be ignored (``--device`` resolved: :func:`~hf_adaptive_spec.default_model.resolve_device`)."""
    for flag, value in (("--context-length", args.context_length), ("--repeats", args.repeats),
                        ("--num-threads", args.num_threads), ("--drafter-layers", args.drafter_layers)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be at least 1, got {value}")
    try:
        sizes = [int(n) for n in args.verify_tokens.split(",")]
    except ValueError:
        sizes = [0]
    if min(sizes) < 1:
        parser.error(f"--verify-tokens must be positive integers separated by commas, got {args.verify_tokens!r}")
    args.lookup_tokens = parse_lookup_tokens(parser, args)
    try:
        args.device = resolve_device(args.device)
    except ValueError as error:  # cuda without a GPU, a name torch does not have: before the model loads
        parser.error(str(error))


def parse_lookup_tokens(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[int, ...] | None:
    """``--lookup-tokens`` as branch lengths. Left out: no branch (0) for a timing, and None with ``--rerank``, which
    then ranks with the lengths the profile's recommendation was ranked with (:func:`~.cli.ranked_lookup_counts`)."""
    if args.lookup_tokens is None:
        return None if args.rerank else (0,)
    try:
        counts = lookup_counts_from_text(args.lookup_tokens)
    except ValueError as error:
        parser.error(f"--lookup-tokens: {error}")
    if max(counts) and not args.recording:
        parser.error("--lookup-tokens ranks recordings with the prompt-lookup branch: pass it with --recording")
    return counts


def checked_profile_path(parser: argparse.ArgumentParser, json_path: str | None) -> Path:
    """Where the profile is written (``--json``, else :func:`default_profile_path`), refused before anything loads or
    is timed when it cannot be written there (a folder, under a file, a folder not writable) or when it holds a bench
    report, which the profile would replace."""
    if json_path is not None and not json_path.strip():  # an unset shell variable: not the default profile's path
        parser.error("--json is empty: give the profile's path, or leave --json out for the default profile")
    path = Path(json_path) if json_path else default_profile_path()
    named = f"--json {path}" if json_path else f"the default profile path {path} (${PROFILE_ENV}, else ~/.cache)"
    if path.is_dir():
        parser.error(f"{named} is a folder: give the profile's file, e.g. {path / 'profile.json'}")
    problem = folder_write_problem(path.parent)
    if problem is not None:
        parser.error(f"{named}: {problem}: give a path in a folder you can write in")
    if path.is_file() and is_bench_report(path):
        parser.error(f"{named} holds a bench report (`hf-adaptive-spec bench --json` wrote it), which the profile "
                     "would replace: give the profile another path (--json PATH), or move the report first")
    return path


def refuse_timing_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> None:
    """``--rerank`` loads and times nothing: refuse a timing option given with it, by name, instead of ignoring it
    (``--rerank --dtype bfloat16`` would rank on the profile's float32 costs)."""
    given = [flag for flag in TIMING_FLAGS
             if getattr(args, flag[2:].replace("-", "_")) != parser.get_default(flag[2:].replace("-", "_"))
             or any(token == flag or token.startswith(flag + "=") for token in argv)]
    if given:
        parser.error(f"--rerank ranks on the costs already in the profile at --json and times nothing: "
                     f"{', '.join(given)} would be ignored. Leave them out, or time a new profile with them (without "
                     "--rerank).")


def with_recorded_sizes(verify_tokens: str, recordings: list, lookup_counts: Sequence[int] = ()) -> str:
    """``--verify-tokens`` with 1 (a plain step) and each recording's ``total_tokens`` (its largest tree), alone and
    plus each of ``lookup_counts`` (the branch grafted onto it), added when there are recordings to rank, as
    ``record --profile`` times them: the ranking prices each of them. (A bucketed profile prices a tree at its
    bucket: give it no lookup lengths, which would only compile graphs the ranking never reads.)"""
    sizes = {int(n) for n in verify_tokens.split(",")}
    if recordings:
        totals = {recording.tree_config.total_tokens for recording in recordings}
        sizes |= {1} | {total + lookup for total in totals for lookup in {0, *lookup_counts}}
    return ",".join(map(str, sorted(sizes)))


def parse_buckets(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[int, ...]:
    """``--buckets`` as distinct ascending sizes of at least 2 (``buckets_from_text``), the largest at least
    :data:`FEWEST_LARGEST_BUCKET`, given only with the static path; left out, :func:`default_buckets` for the parsed
    ``--lookup-tokens``."""
    static = args.static or args.compile
    if args.buckets is None:
        return default_buckets(args.lookup_tokens or (0,)) if static else DEFAULT_BUCKETS
    if not static:  # the eager path verifies any size: given alone the sizes would be ignored
        parser.error("--buckets sets the static path's verification sizes: add --static or --compile")
    try:
        buckets = buckets_from_text(args.buckets)
    except ValueError as error:
        parser.error(f"--buckets: {error}")
    if buckets[-1] < FEWEST_LARGEST_BUCKET:
        parser.error(f"--buckets {args.buckets}: the largest bucket must be at least {FEWEST_LARGEST_BUCKET}: the "
                     "profile times a draft level after the first inside generate on trees of two levels (the root "
                     "and two drafted tokens), which it would cap to one level. Add a larger bucket, e.g. 2,3,4,8")
    return buckets


def default_buckets(lookup_tokens: list[int]) -> tuple[int, ...]:
    """The engine's buckets plus ``1 + L`` for each prompt-lookup length ``L`` ranked: where the branch matched, a
    lookup-first cycle verifies the root and the chain alone, and on a curve that rises below the next bucket its
    own bucket is cheaper (the AVX-512 bfloat16 EPYC: 5 tokens 18.8 ms against 20.2 ms padded to 8)."""
    return tuple(sorted(set(DEFAULT_BUCKETS) | {1 + n for n in lookup_tokens if n}))


def tokens_after_context(verify_sizes: tuple[int, ...], buckets: tuple[int, ...] = DEFAULT_BUCKETS) -> int:
    """What the profile's static-path measurements write after ``--context-length`` tokens: the largest bare
    verification, or a bucket run's new tokens and its last tree padded to the largest bucket."""
    return max(*verify_sizes, BUCKET_RUN_TOKENS + buckets[-1])


def check_cache_slots(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--cache-slots`` names a static cache long enough for every measurement, before minutes of timing."""
    if not (args.static or args.compile):
        parser.error("--cache-slots times the static-cache path: add --static or --compile.")
    sizes = [int(n) for n in args.verify_tokens.split(",")]
    needed = args.context_length + tokens_after_context((*sizes, *args.buckets), args.buckets) + 1
    if args.cache_slots < needed:
        parser.error(
            f"--cache-slots {args.cache_slots} cannot hold --context-length {args.context_length} and what the profile "
            f"writes after it: pass --cache-slots >= {needed} or a shorter --context-length."
        )
