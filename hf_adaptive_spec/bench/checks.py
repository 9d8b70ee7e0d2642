"""The bench's checks of a run's arguments and methods before anything loads (a size that would fail inside torch,
a device torch cannot place a model on, an output the run could not write at its end, an option no selected method
reads, a tree that drafts nothing, a profile of another cost curve), and the tree ``--tree_profile`` recommends."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import torch

from ..checkpoints import shipped_checkpoint
from ..core.cost_curve import CostCurve
from ..core.files import folder_write_problem
from ..default_model import DEFAULT_MODEL_ID, resolve_device
from ..profiling import HardwareProfile, recommended_buckets, recommended_lookup_tokens, recommended_tree
from .arguments import BenchArguments, MethodOptions, sampling_kwargs
from .errors import BenchError
from .methods import (
    FLOAT32_SUFFIX,
    METHODS,
    SIZED_SUFFIX,
    TREE_SHAPE_SEPARATOR,
    BenchMethod,
    registered_name,
)
from .methods.lookup_branch import LOOKUP_SUFFIX, WithLookupBranch
from .methods.stock import Stock
from .progress import progress_path_for, read_progress
from .records import FP32_REFERENCE_METHOD
from .report import is_bench_report, read_report


def take_tree_from_profile(args: BenchArguments, options: MethodOptions, methods: dict[str, BenchMethod]) -> None:
    """Set the static tree of ``tree`` and ``eagle3`` to what ``--tree_profile`` recommends, ``+lookup``'s
    branch unless ``--lookup_tokens`` was given, and on the compiled path the buckets it ranked the tree on unless
    ``--verify_buckets`` was given. Refused where no selected method takes any of them
    (:func:`check_tree_profile_read`), where the profile timed another target or EAGLE-3 drafter, cost curve or thread
    count than this run's, and where a method would draft its tree otherwise than it was ranked
    (:func:`_check_drafted_as_ranked`, :func:`_check_branch_as_ranked`)."""
    check_tree_profile_read(options, methods)
    try:
        profile = HardwareProfile.load(options.tree_profile)
        _check_profile_measured_this_run(profile, args, options)
        tree = recommended_tree(options.tree_profile, model=args.model or DEFAULT_MODEL_ID,
                                drafter=options.eagle3_checkpoint or shipped_checkpoint("eagle3"))
        lookup_tokens = recommended_lookup_tokens(options.tree_profile)
        if options.verify_buckets is None and _buckets_verified_in(options, methods):  # the tree's ranking buckets
            options.verify_buckets = ",".join(map(str, recommended_buckets(options.tree_profile)))
    except (OSError, ValueError) as error:
        raise BenchError(f"--tree_profile: {error}") from error
    _check_drafted_as_ranked(profile, options, methods)
    _check_branch_as_ranked(profile, options, methods)
    options.tree_depth, options.tree_top_k, options.tree_total_tokens = tree.depth, tree.top_k, tree.total_tokens
    if options.lookup_tokens is None and lookup_tokens:
        options.lookup_tokens = lookup_tokens


def check_tree_profile_read(options: MethodOptions, methods: dict[str, BenchMethod]) -> None:
    """Refuse ``--tree_profile`` where no selected method takes anything from it, as ``--tree-depth`` is refused
    where no method reads it (:func:`check_options_read`): its tree goes to a static-tree method without its own
    ``@D/K/N``, its prompt-lookup branch to ``+lookup`` without its own N (unless ``--lookup_tokens`` is given), its
    buckets to the engine methods on ``--compile``'s path (unless ``--verify_buckets`` is given). The report would
    list the profile, and the tree it fills in, as if they shaped a result."""
    read = set().union(*(method.options_read(options) for method in methods.values()))
    takes_branch = "lookup_tokens" in read and options.lookup_tokens is None
    takes_buckets = options.verify_buckets is None and _buckets_verified_in(options, methods)
    if "tree_depth" in read or takes_branch or takes_buckets:
        return
    static = ", ".join(name for name, cls in METHODS.items() if cls.static_tree)
    raise BenchError(
        f"--tree_profile {options.tree_profile}: no selected method ({', '.join(methods)}) takes anything from it. "
        f"Its tree goes to a static-tree method without its own @D/K/N ({static}), its prompt-lookup branch to a "
        f"{LOOKUP_SUFFIX} method without --lookup_tokens, its buckets to a tree or eagle3 method on --compile's path "
        "without --verify_buckets: drop it, or add such a method."
    )


def _check_profile_measured_this_run(profile: HardwareProfile, args: BenchArguments, options: MethodOptions) -> None:
    """The profile's tree is the best on the curve it measured: its device type, dtype and path (eager, or the
    compiled static-cache path of ``--compile``; the bench runs no uncompiled static path), and on a CPU its thread
    count (what a many-token verification costs against one token depends on the threads). On another curve it is
    another machine's best, timed under this run's name: refuse, naming the profile to measure."""
    curve = profile.cost_curve()
    measured = (curve.device, curve.dtype, curve.path)
    here = CostCurve.of(run_device(args.device), args.dtype, "compiled" if options.compile else "eager")
    run = (here.device, here.dtype, here.path)
    measure_here = (f"`hf-adaptive-spec profile --device {run[0]} --dtype {run[1]}"
                    f"{' --compile' if options.compile else ''} "
                    "--recording DIR`")
    if measured != run:  # the instruction set is recommended_tree's check
        paths = {"eager": "the eager path", "static": "the uncompiled static-cache path",
                 "compiled": "the compiled static-cache path (--compile)"}
        raise BenchError(
            f"--tree_profile {options.tree_profile} was measured on {measured[0]} in {measured[1]} on "
            f"{paths.get(measured[2], measured[2])}, and this run is on {run[0]} in {run[1]} on {paths[run[2]]}: its "
            f"tree was ranked on another cost curve. Run as profiled, or measure this run's curve with {measure_here} "
            "and pass that profile."
        )
    threads = torch.get_num_threads()  # the run's: --num-threads is set first
    if curve.device == "cpu" and profile.num_threads != threads:
        raise BenchError(
            f"--tree_profile {options.tree_profile} was measured with {profile.num_threads} CPU threads, and this run "
            f"uses {threads}: what a verification of many tokens costs against one token depends on the threads, so "
            f"its tree was ranked on another cost curve. Pass --num-threads {profile.num_threads}, or measure this "
            f"run's curve with {measure_here.removesuffix('`')} --num-threads {threads}` and pass that profile."
        )


def _check_drafted_as_ranked(profile: HardwareProfile, options: MethodOptions, methods: dict[str, BenchMethod]) -> None:
    """The profile ranked its tree drafted every cycle (``StaticTreePolicy``), or, where its recommendation is
    ``lookup_first``, only where the prompt-lookup branch did not match (``LookupFirstPolicy``: a matched cycle
    verifies the chain alone, at a cost of its own). A method that takes the tree and drafts it the other way would
    time a tree not ranked for it, as if it were the profile's: refuse it, naming the method that drafts it as ranked
    and the ``@D/K/N`` that gives the other its own tree (a tree of depth 0 drafts nothing either way)."""
    tree = profile.recommendation["tree"]
    lookup_first = bool(tree.get("lookup_first"))
    other = [name for name, method in methods.items()
             if "tree_depth" in method.options_read(options) and method.drafts_lookup_first != lookup_first]
    if not other or tree["depth"] == 0:
        return
    shape = f"{tree['depth']}/{tree['top_k']}/{tree['total_tokens']}"
    ranked, instead = ("only where its prompt-lookup branch did not match (LookupFirstPolicy)", "every cycle")
    branch = LOOKUP_SUFFIX if _ranked_branch(profile) else ""
    as_ranked = f"eagle3-lookup-first{LOOKUP_SUFFIX}"
    if not lookup_first:
        ranked, instead = "every cycle (StaticTreePolicy)", "only where the prompt-lookup branch did not match"
        as_ranked = f"eagle3{branch} (or tree{branch})"
    raise BenchError(
        f"--tree_profile {options.tree_profile} ranked its tree ({shape}) drafted {ranked}, and {', '.join(other)} "
        f"would draft it {instead}: a tree not ranked that way, timed as the profile's. Run {as_ranked} for the "
        f"profile's recommendation; to time the other way too, give that method its own tree, e.g. "
        f"{'eagle3' if lookup_first else 'eagle3-lookup-first'}@{shape}{LOOKUP_SUFFIX}."
    )


def _ranked_branch(profile: HardwareProfile) -> int:
    """The prompt-lookup branch length the profile ranked its recommended tree with (0: none); profiles written
    before each ranked tree kept its own length hold it in the recommendation alone."""
    recommendation = profile.recommendation
    return int(recommendation["tree"].get("lookup_tokens", recommendation.get("lookup_tokens")) or 0)


def _check_branch_as_ranked(profile: HardwareProfile, options: MethodOptions, methods: dict[str, BenchMethod]) -> None:
    """The profile ranked its tree with the prompt-lookup branch (:func:`_ranked_branch`), or without, and the best
    tree differs with and without it (where the branch matches it carries the cycle, so a smaller tree wins with it).
    A method that takes the tree and drafts it the other way (no ``+lookup`` for a tree ranked with the branch,
    ``+lookup`` for one ranked without) would time a tree not ranked for it, as if it were the profile's: refuse it,
    naming the method that drafts it as ranked and the ``@D/K/N`` that gives it its own tree. The branch's length may
    differ from the ranked one (``+lookupN``, ``--lookup_tokens``: comparing lengths is what they are for). A tree of
    depth 0 with the branch is the branch alone: :func:`check_trees_draft` refuses a method without ``+lookup``."""
    tree, branch = profile.recommendation["tree"], _ranked_branch(profile)
    other = [name for name, method in methods.items()
             if "tree_depth" in method.options_read(options) and isinstance(method, WithLookupBranch) != bool(branch)]
    if not other or (tree["depth"] == 0 and branch):
        return
    shape = f"{tree['depth']}/{tree['top_k']}/{tree['total_tokens']}"
    ranked = f"with its {branch}-token prompt-lookup branch" if branch else "without a prompt-lookup branch"
    as_ranked = ", ".join(_with_branch(name) if branch else _LOOKUP_IN_NAME.sub("", name) for name in other)
    raise BenchError(
        f"--tree_profile {options.tree_profile} ranked its tree ({shape}) {ranked}, and {', '.join(other)} would "
        f"draft it {'without one' if branch else 'with one'}: a tree not ranked that way (the best tree differs with "
        f"and without the branch), timed as the profile's. Run {as_ranked} for the profile's recommendation; to time "
        f"the other way too, give that method its own tree, e.g. {_with_own_tree(other[0], shape)}."
    )


#: a method name's prompt-lookup suffix (``+lookup`` or ``+lookupN``)
_LOOKUP_IN_NAME = re.compile(re.escape(LOOKUP_SUFFIX) + r"\d*")


def _with_branch(name: str) -> str:
    """``name`` with ``+lookup``, where the bench takes it: after any ``@D/K/N``, before ``+sized`` and ``+fp32``."""
    suffixes = [name.find(suffix) for suffix in (SIZED_SUFFIX, FLOAT32_SUFFIX) if suffix in name]
    cut = min(suffixes, default=len(name))
    return name[:cut] + LOOKUP_SUFFIX + name[cut:]


def _with_own_tree(name: str, shape: str) -> str:
    """``name`` with its own ``@D/K/N``: right after the method's registered name, before every suffix."""
    registered = registered_name(name)
    return f"{registered}{TREE_SHAPE_SEPARATOR}{shape}{name[len(registered):]}"


def check_profile_cache_length(options: MethodOptions, methods: dict[str, BenchMethod]) -> None:
    """Once ``--max_cache_len`` is set (given, or sized to the questions): refuse a ``--tree_profile`` whose buckets
    were timed in a StaticCache of another length than the run's one cache, where a method takes its tree and decodes
    in that cache. A static cache attends over every slot, so the tree was ranked on another curve (one timed in a
    shorter cache under-charges every bucket, the larger ones most). ``+sized`` methods decode each call in a cache
    sized for it, no one length, and profiles of the eager path or made before ``cache_slots`` was kept are left."""
    slots = HardwareProfile.load(options.tree_profile).cache_slots
    shared = [name for name, method in methods.items()
              if "tree_depth" in method.options_read(options) and method.on_fast_path(options)
              and not method.sized_cache and not method.in_float32]
    if slots is None or not shared or slots == options.max_cache_len:
        return
    raise BenchError(
        f"--tree_profile {options.tree_profile} timed its buckets in a StaticCache of {slots} slots, and "
        f"{', '.join(shared)} would decode its tree in this run's cache of {options.max_cache_len} (--max_cache_len): "
        "a static cache attends over every slot, so the tree was ranked on another cost curve. Pass --max_cache_len "
        f"{slots} (where the questions fit), or measure this run's curve with `hf-adaptive-spec profile --compile "
        f"--cache-slots {options.max_cache_len} --recording DIR` and pass that profile."
    )


def _buckets_verified_in(options: MethodOptions, methods: dict[str, BenchMethod], in_float32: bool = False) -> bool:
    """Whether some method verifies in the buckets set on the run's model (``--verify_buckets``, or the profile's):
    an engine method on ``--compile``'s path. With ``in_float32``: in those set on the float32 copy that ``+fp32``
    methods decode with (``--fp32_verify_buckets``)."""
    return options.compile and any(method.runs_engine and method.in_float32 == in_float32
                                   for method in methods.values())


#: options every method reads (or the run itself: the fast path's are checked by :func:`check_fast_path_options`)
RUN_WIDE_OPTIONS = (
    "max_new_tokens", "temperature", "compile", "max_cache_len", "verify_buckets", "fp32_verify_buckets", "tree_profile"
)


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


def run_device(name: str) -> torch.device:
    """``--device`` as the torch device the run loads its model on, refused before anything loads where torch cannot
    place a model (:func:`~hf_adaptive_spec.default_model.resolve_device` names the fix): a name torch does not know
    (``foo``), or a device this machine does not have (``cuda`` or ``cuda:0`` without a GPU)."""
    try:
        return resolve_device(name)
    except (ValueError, RuntimeError) as error:  # RuntimeError: torch.device's own, for a name it cannot parse
        raise BenchError(str(error)) from None


def check_output_paths(args: BenchArguments) -> None:
    """Refuse, before anything loads, an output the run writes only at its end, after all its timing, and could not
    write there: a path that names no file (``--json ""``), a folder where a file goes (``--json``, ``--report_json``,
    ``--markdown``), a file where the plots' folder goes, or a path under a file or in a folder this user cannot
    write in."""
    outputs = (("--json", args.json, ".json"), ("--report_json", args.report_json, ".json"),
               ("--markdown", args.markdown, ".md"), ("--plots", args.plots, None))
    for flag, path, suffix in outputs:
        if path is None:
            continue
        if suffix and (not path.name or path.is_dir()):  # "" parses to ".", the current folder
            raise BenchError(f"{flag} {str(path)!r} names a folder ({path.resolve()}), not a file: give a file path, "
                             f"e.g. {path / ('run' + suffix)}")
        if not suffix and path.exists() and not path.is_dir():
            raise BenchError(f"--plots {path} is a file: give a folder for the PNG plots (made if missing)")
        _check_can_write_in(flag, path.parent if suffix else path)


def _check_can_write_in(flag: str, folder: Path) -> None:
    """Refuse a folder that cannot be made (a file stands on its path) or written in (the run makes it if missing)."""
    problem = folder_write_problem(folder)
    if problem is not None:
        raise BenchError(f"{flag}: {problem}: give a path in a folder you can write in")


def check_json_is_a_report(args: BenchArguments) -> None:
    """Refuse, before anything loads, a run that measures over a ``--json`` holding another kind of file (a hardware
    profile ``hf-adaptive-spec profile --json`` wrote there, say): the run would replace it with its report at its end
    and write its progress file beside it. A bench report is replaced, as a run again is meant to (a ``--report_only``
    or a ``--resume`` with nothing left to run refuses to rebuild over it: :func:`~.cli._rebuilt_report_path`)."""
    if args.json is None or args.report_only or not args.json.is_file():
        return
    if is_bench_report(args.json):
        return
    try:
        HardwareProfile.load(args.json)
        kind = "a hardware profile (`hf-adaptive-spec profile --json` writes one)"
    except ValueError:
        kind = "no bench report (no JSON object with 'settings' and 'records')"
    raise BenchError(f"--json {args.json} holds {kind}: this run would replace it with its report and write "
                     f"{progress_path_for(args.json).name} beside it. Pass another --json, or move the file "
                     "away.") from None


def check_progress_kept(args: BenchArguments) -> None:
    """Refuse a run without ``--resume`` whose progress file holds records that no report at ``--json`` holds (an
    interrupted run's, or a resumed session's since its report): it would start the file afresh and lose them. A
    finished run's progress file, every record of which its report holds, is started afresh (running again without
    ``--resume`` measures afresh, as documented)."""
    path = progress_path_for(args.json) if args.json else None
    if args.resume or args.report_only or path is None or not path.is_file() or not path.read_text().strip():
        return
    measured = read_progress(path)[1]  # not a progress file: refused, naming it
    reported = set()
    if args.json.is_file():
        records = read_report(args.json)["records"]
        reported = {(record.get("question_id"), record.get("method")) for record in records if isinstance(record, dict)}
    unreported = [key for key in measured if key not in reported]
    if unreported:
        raise BenchError(
            f"{path} holds {len(unreported)} measured (question, method) pair(s) that no report at {args.json} holds "
            "(an interrupted run): without --resume this run would start it afresh and lose them. Pass --resume to "
            "continue that run (or --report_only to report it), or move the file away (or pass another --json) to "
            "measure afresh."
        )


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
    if options.verify_buckets is not None and not _buckets_verified_in(options, methods):
        raise BenchError("--verify_buckets sets the verification sizes of this package's methods on the compiled fast "
                         "path, and none runs there with the run's model (a +fp32 method decodes with the float32 "
                         "copy, whose buckets --fp32_verify_buckets sets): add --compile and a tree or eagle3 method, "
                         "or drop it")
    if options.fp32_verify_buckets is not None and not _buckets_verified_in(options, methods, in_float32=True):
        raise BenchError("--fp32_verify_buckets sets the verification sizes of the float32 copy that +fp32 methods "
                         "decode with on the compiled fast path, and no selected method runs there: add --compile and "
                         "a tree or eagle3 method with +fp32 (in a run of another --dtype), or drop it")
    for flag, sizes in (("--verify_buckets", "bucket_sizes"), ("--fp32_verify_buckets", "fp32_bucket_sizes")):
        try:
            _ = getattr(options, sizes)  # parses the flag's text
        except ValueError as error:
            raise BenchError(f"{flag}: {error}") from error
    if fast and args.warmup == 0:
        raise BenchError(f"--warmup 0 would time the compile of {', '.join(fast)} in its first turn: pass --warmup 2 "
                         "(a compiled method's compile time is its first warm-up call's over its last)")


def measures_fp32_agreement(args: BenchArguments, options: MethodOptions) -> bool:
    """Below float32 and greedy: a sampled float32 answer is one draw, which no method's draw is meant to match."""
    return args.dtype != "float32" and args.fp32_agreement and options.temperature == 0
