"""The bench's checks of a run's arguments and methods before anything loads (a size that would fail inside torch,
an option no selected method reads, a tree that drafts nothing, a profile of another cost curve), and the tree
``--tree_profile`` recommends."""

from __future__ import annotations

import dataclasses

from ..checkpoints import shipped_checkpoint
from ..core.cost_curve import CostCurve
from ..default_model import DEFAULT_MODEL_ID, resolve_device
from ..profiling import HardwareProfile, recommended_buckets, recommended_lookup_tokens, recommended_tree
from .arguments import BenchArguments, MethodOptions, sampling_kwargs
from .errors import BenchError
from .methods import BenchMethod
from .methods.lookup_branch import LOOKUP_SUFFIX, WithLookupBranch
from .methods.stock import Stock
from .records import FP32_REFERENCE_METHOD


def take_tree_from_profile(args: BenchArguments, options: MethodOptions) -> None:
    """Set the static tree of ``tree`` and ``eagle3`` to what ``--tree_profile`` recommends, and ``+lookup``'s
    branch unless ``--lookup_tokens`` was given (refused when the profile timed another target or EAGLE-3 drafter
    than this run's)."""
    try:
        _check_profile_measured_this_run(HardwareProfile.load(options.tree_profile), args, options)
        tree = recommended_tree(options.tree_profile, model=args.model or DEFAULT_MODEL_ID,
                                drafter=options.eagle3_checkpoint or shipped_checkpoint("eagle3"))
        lookup_tokens = recommended_lookup_tokens(options.tree_profile)
        if options.verify_buckets is None and options.compile:  # the tree was ranked on the profile's buckets
            options.verify_buckets = ",".join(map(str, recommended_buckets(options.tree_profile)))
    except (OSError, ValueError) as error:
        raise BenchError(f"--tree_profile: {error}") from error
    options.tree_depth, options.tree_top_k, options.tree_total_tokens = tree.depth, tree.top_k, tree.total_tokens
    if options.lookup_tokens is None and lookup_tokens:
        options.lookup_tokens = lookup_tokens


def _check_profile_measured_this_run(profile: HardwareProfile, args: BenchArguments, options: MethodOptions) -> None:
    """The profile's tree is the best on the curve it measured: its device type, dtype and path (eager, or the
    compiled static-cache path of ``--compile``; the bench runs no uncompiled static path). On another curve it is
    another machine's best, timed under this run's name: refuse, naming the profile to measure."""
    curve = profile.cost_curve()
    measured = (curve.device, curve.dtype, curve.path)
    here = CostCurve.of(resolve_device(args.device), args.dtype, "compiled" if options.compile else "eager")
    run = (here.device, here.dtype, here.path)
    if measured != run:  # the instruction set is recommended_tree's check
        paths = {"eager": "the eager path", "static": "the uncompiled static-cache path",
                 "compiled": "the compiled static-cache path (--compile)"}
        raise BenchError(
            f"--tree_profile {options.tree_profile} was measured on {measured[0]} in {measured[1]} on "
            f"{paths.get(measured[2], measured[2])}, and this run is on {run[0]} in {run[1]} on {paths[run[2]]}: its "
            "tree was ranked on another cost curve. Run as profiled, or measure this run's curve with "
            f"`hf-adaptive-spec profile --dtype {run[1]}{' --compile' if options.compile else ''} --recording DIR` "
            "and pass that profile."
        )


#: options every method reads (or the run itself: the fast path's are checked by :func:`check_fast_path_options`)
RUN_WIDE_OPTIONS = ("max_new_tokens", "temperature", "compile", "max_cache_len", "verify_buckets", "tree_profile")


def options_given(options: MethodOptions) -> list[str]:
    """The method options ``options`` sets away from their defaults (the run-wide ones aside), before
    ``--tree_profile`` fills in its tree."""
    return [f.name for f in dataclasses.fields(options)
            if f.name not in RUN_WIDE_OPTIONS and getattr(options, f.name) != f.default]


def check_options_read(given: list[str], options: MethodOptions, methods: dict[str, BenchMethod]) -> None:
    """Refuse an option given that no selected method reads (``--ltd-policy`` without ``eagle3-ltd``,
    ``--dvi-exit-layer`` with ``--dvi-adapter``, ``--assistant-confidence-threshold`` with ``eagle3-confidence``,
    which runs transformers' default): the run would ignore it and its report list it as a setting."""
    read = set().union(*(method.options_read(options) for method in methods.values()))
    if options.tree_profile:  # the profile's check names the drafter it must have timed
        read.add("eagle3_checkpoint")
    unread = [name for name in given if name not in read]
    if unread:
        helps = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(options)}
        named = "; ".join(f"--{name.replace('_', '-')} ({helps[name]})" for name in unread)
        raise BenchError(f"no selected method ({', '.join(methods)}) reads {named}: drop "
                         f"{'it' if len(unread) == 1 else 'them'}, or add a method that reads "
                         f"{'it' if len(unread) == 1 else 'them'}")


def check_trees_draft(options: MethodOptions, methods: dict[str, BenchMethod]) -> None:
    """Refuse a static tree that drafts nothing (depth 0, or 1 token: the root alone) or no children (top-k 0): its
    method would run plain one-token steps under a tree method's name. Only a ``+lookup`` method may draft nothing,
    verifying the prompt-lookup branch alone (what a profile recommends where a many-token forward costs many)."""
    for name, method in methods.items():
        if not method.static_tree:
            continue
        depth, top_k, total_tokens = method.tree_shape or (
            options.tree_depth, options.tree_top_k, options.tree_total_tokens
        )
        branch_alone = depth == 0 and isinstance(method, WithLookupBranch)
        if branch_alone or (depth >= 1 and top_k >= 1 and total_tokens >= 2):
            continue
        flags = "--tree-depth/--tree-top-k/--tree-total-tokens"
        source = "its @D/K/N" if method.tree_shape else (
            "--tree_profile's recommendation" if options.tree_profile else flags
        )
        raise BenchError(
            f"{name}: the tree of {source} (depth {depth}, top-k {top_k}, {total_tokens} tokens, root included) drafts "
            f"nothing, so {name} would run plain one-token steps under its name. Give it a tree of depth >= 1, top-k "
            f">= 1 and >= 2 tokens; for the prompt-lookup branch alone add {LOOKUP_SUFFIX} (e.g. eagle3{LOOKUP_SUFFIX} "
            "with depth 0), and for one-token steps on purpose run plain-steps."
        )


def check_float32_stock_once(args: BenchArguments, options: MethodOptions, methods: dict[str, BenchMethod]) -> None:
    """Below float32 the agreement's float32 answers are eager float32 stock, timed beside ``stock`` and reported as
    ``stock-fp32``: ``stock+fp32`` would decode and time each of them a second time (about 200 s per Spec-Bench
    13 x 1 on two cores) under another name."""
    twice = [name for name, method in methods.items() if method.in_float32 and type(method) is Stock]
    if twice and measures_fp32_agreement(args, options):
        raise BenchError(
            f"{', '.join(twice)} decodes what the float32 agreement already decodes and times (its row "
            f"{FP32_REFERENCE_METHOD}: eager float32 stock, beside stock): drop {twice[0]}, or pass "
            "--no_fp32_agreement to time eager float32 stock as a method of its own"
        )


def check_sizes(args: BenchArguments, options: MethodOptions) -> None:
    """Refuse, before loading anything, sizes below 1 (a zero would run plain decoding under a method's name or fail
    inside torch) and a temperature generate cannot take."""
    for flag, value in (("--limit", args.limit), ("--per-category", args.per_category),
                        ("--max-new-tokens", options.max_new_tokens),
                        ("--warmup", None if args.warmup == 0 else args.warmup),
                        ("--num-threads", args.num_threads), ("--lookup-tokens", options.lookup_tokens),
                        ("--lookup-ngram-size", options.lookup_ngram_size),
                        ("--prompt-lookup-num-tokens", options.prompt_lookup_num_tokens),
                        ("--dvi-depth", options.dvi_depth), ("--num-assistant-tokens", options.num_assistant_tokens),
                        ("--drafter-layers", options.drafter_layers),
                        ("--early-exit-layers", options.early_exit_layers),
                        ("--dvi-exit-layer", options.dvi_exit_layer), ("--max-cache-len", options.max_cache_len)):
        if value is not None and value < 1:
            raise BenchError(f"{flag} must be at least 1, got {value}")
    try:
        sampling_kwargs(options.temperature)
    except ValueError as error:
        raise BenchError(str(error)) from error
    if not args.method_names:
        raise BenchError(f"--methods {args.methods!r} names no method: give a comma-separated list, e.g. stock,tree")
    if not 0 <= args.seed < 2**32:  # set_seed's range; a traceback from deep inside it otherwise
        raise BenchError(f"--seed must be in [0, 2**32 - 1], got {args.seed}")
    threshold = options.assistant_confidence_threshold
    if threshold is not None and not 0 <= threshold <= 1:  # transformers takes any value: 2.5 stops every draft
        raise BenchError(f"--assistant_confidence_threshold is a draft probability in [0, 1], got {threshold}")


def check_fast_path_options(args: BenchArguments, options: MethodOptions, methods: dict) -> None:
    """Refuse fast-path options no selected method would use (the report would claim them), and an unwarmed
    compiled method (its first timed call would compile: stock-compiled's compile is not taken out)."""
    fast = [name for name, method in methods.items() if method.on_fast_path(options)]
    if options.compile and not any(method.runs_engine for method in methods.values()):
        raise BenchError("--compile moves this package's methods to the compiled fast path, and none is selected: "
                         "drop it (stock-compiled compiles on its own) or add a tree or eagle3 method")
    if options.max_cache_len is not None and not fast:
        raise BenchError("--max_cache_len sizes the fast path's StaticCache, and no selected method decodes there: "
                         "add --compile or stock-compiled, or drop it")
    if options.verify_buckets is not None and not (options.compile and any(m.runs_engine for m in methods.values())):
        raise BenchError("--verify_buckets sets the verification sizes of this package's methods on the compiled fast "
                         "path, and none runs there: add --compile and a tree or eagle3 method, or drop it")
    try:
        _ = options.bucket_sizes  # parses --verify_buckets
    except ValueError as error:
        raise BenchError(f"--verify_buckets: {error}") from error
    if fast and args.warmup == 0:
        raise BenchError(f"--warmup 0 would time the compile of {', '.join(fast)} in its first turn: pass --warmup 2 "
                         "(a compiled method's compile time is its first warm-up call's over its last)")


def measures_fp32_agreement(args: BenchArguments, options: MethodOptions) -> bool:
    """Below float32 and greedy: a sampled float32 answer is one draw, which no method's draw is meant to match."""
    return args.dtype != "float32" and args.fp32_agreement and options.temperature == 0
