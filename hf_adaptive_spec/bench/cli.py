"""``hf-adaptive-spec bench`` / ``python -m hf_adaptive_spec.bench``: parse, run, report."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import HfArgumentParser, set_seed

from ..default_model import DEFAULT_MODEL_ID
from ..generation import fast_path
from ..hub.errors import ArtifactError
from .arguments import DEFAULT_LOOKUP_TOKENS, BenchArguments, MethodOptions, sampling_kwargs
from .checks import (
    check_fast_path_options,
    check_float32_stock_once,
    check_json_is_a_report,
    check_options_read,
    check_output_paths,
    check_profile_cache_length,
    check_progress_kept,
    check_sizes,
    check_trees_draft,
    measures_fp32_agreement,
    options_given,
    run_device,
    take_tree_from_profile,
)
from .errors import BenchError
from .fast_path import first_turn_slots, static_cache_length
from .loading import load_model
from .markdown import render_markdown, write_markdown
from .methods import BenchMethod, build_methods
from .plots import write_plots
from .progress import (
    LOADED,
    QUESTIONS_DIGEST,
    RESTARTED_LEARNING,
    SESSIONS,
    ProgressLog,
    loaded_digests,
    progress_path_for,
    read_progress,
    writing_progress_alone,
)
from .questions import Question, load_questions, questions_digest
from .report import build_report, measured_on, read_report, write_json
from .runner import run_benchmark

PROG = "hf-adaptive-spec bench"


def make_parser() -> HfArgumentParser:
    """Parser of :class:`BenchArguments` and :class:`MethodOptions`."""
    return HfArgumentParser(
        (BenchArguments, MethodOptions),
        prog=PROG,
        description=(
            "Spec-Bench protocol, batch size 1: greedy with every method checked token for token against stock, "
            "or sampling (--temperature)."
        ),
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; ``argv`` are the arguments after ``bench`` (default: ``sys.argv[1:]``).

    Returns:
        0 on success, 2 on a usage or setup error (printed as one line on stderr).
    """
    parser = make_parser()
    args, options, unknown = parser.parse_args_into_dataclasses(
        args=sys.argv[1:] if argv is None else argv, look_for_args_file=False, return_remaining_strings=True
    )
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        run(args, options)
    except BenchError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    return 0


def run(args: BenchArguments, options: MethodOptions) -> dict[str, Any]:
    """Load, prepare every method, benchmark, write the requested outputs; return the report. Outputs the run could
    not write at its end are refused first, and so is a --json of another kind than a bench report. A run that writes
    the progress file of --json is refused while another one writes it (:func:`writing_progress_alone`), and without
    --resume where that file holds records no report holds (:func:`check_progress_kept`)."""
    check_output_paths(args)
    check_json_is_a_report(args)
    if args.json is None or args.report_only:  # --report_only reads the progress file and writes --report_json
        return _run(args, options)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(writing_progress_alone(args.json))
        except RuntimeError as error:
            raise BenchError(str(error)) from None
        check_progress_kept(args)
        return _run(args, options)


def _run(args: BenchArguments, options: MethodOptions) -> dict[str, Any]:
    if args.resume and args.json is None:
        raise BenchError("--resume needs --json (the progress file lives next to the JSON report)")
    if args.report_json is not None and not (args.report_only or args.resume):
        raise BenchError("--report_json is where a report rebuilt from the progress file goes (--report_only, or a "
                         "--resume with nothing left to run): a run that measures writes --json")
    check_sizes(args, options)
    device = run_device(args.device)
    given = options_given(options)
    methods = build_methods(args.method_names)
    set_seed(args.seed)
    if args.num_threads:  # before --tree_profile, which compares the profile's threads with the run's
        torch.set_num_threads(args.num_threads)
    if options.tree_profile:
        take_tree_from_profile(args, options, methods)
    questions = load_questions(args.questions, args.category_names, args.limit, args.per_category)
    check_options_read(given, options, methods)
    check_trees_draft(options, methods)
    check_float32_stock_once(args, options, methods)
    if options.lookup_tokens is None:
        options.lookup_tokens = DEFAULT_LOOKUP_TOKENS
    if args.reference not in methods:
        raise BenchError(f"--reference {args.reference!r} is not among the methods run ({', '.join(methods)})")
    if args.report_only:
        return _report_from_progress(args, questions, list(methods))
    check_fast_path_options(args, options, methods)
    models = _load_models(args, options, methods, device)
    if any(method.on_fast_path(options) for method in methods.values()):
        if options.max_cache_len is None and args.resume:
            options.max_cache_len = _stored_cache_length(args)
        _size_static_cache(models.decoding, models.tokenizer, questions, options)
        if options.tree_profile:
            check_profile_cache_length(options, methods)
    for name, method in methods.items():
        try:  # an option the model cannot take (too many drafter layers); a drafter, policy or adapter mistyped, of
            method.prepare(models.decoding_for(method), models.tokenizer, options)  # another kind, or not reachable
        except (ValueError, ArtifactError, OSError) as error:
            raise BenchError(f"method {name!r}: {error}") from error
    measured = _measured_settings(args, options, models.model.device)
    if args.json:  # what a resumed run compares: digesting the target's weights is left to runs that keep progress
        measured[LOADED] = loaded_digests(models.model, methods)
    log = ProgressLog(progress_path_for(args.json), measured, args.resume) if args.json else None
    if log:
        log.record_restarts(_restarted_learning(methods, options, log, len(questions)))
    rebuilt = _nothing_left_to_run(log, questions, methods)
    json_path = _rebuilt_report_path(args, "--resume with every selected pair measured") if rebuilt else None
    warmup_seconds: dict[str, list[list[float]]] = {}
    records = run_benchmark(
        models.model, models.tokenizer, questions, methods, args.warmup, log, args.progress, args.seed,
        options.temperature == 0, models.agreement_reference, warmup_seconds, args.keep_outputs,
    )
    settings = _run_settings(args, measured, list(methods), log, rebuilt)
    report = build_report(records, settings, models.model.device, args.reference, warmup_seconds)
    _write_outputs(report, args, json_path=json_path)
    return report


def _run_settings(
    args: BenchArguments, measured: dict[str, Any], methods: list[str], log: ProgressLog | None, rebuilt: bool
) -> dict[str, Any]:
    """The report's settings: what was measured and how, and what the progress file notes of the run's sessions."""
    return {
        **measured,
        "methods": methods,
        "reference": args.reference,
        **_selection(args),
        "seed": args.seed,
        **({RESTARTED_LEARNING: log.restarted_learning} if log and log.restarted_learning else {}),
        **({SESSIONS: log.header[SESSIONS]} if log and SESSIONS in log.header else {}),
        **({"rebuilt_from": log.path.name} if rebuilt else {}),
        "timing": "warm-up calls untimed (compiled methods compile there); graphs compiled during a timed turn "
        "are taken out of its wall time and counted in compile_seconds",
    }


@dataclass
class RunModels:
    """The run's model in ``--dtype`` and, when the float32 agreement is measured or a ``+fp32`` method decodes with
    it, its float32 copy."""

    model: Any
    tokenizer: Any
    float32: Any | None
    measures_agreement: bool
    float32_decodes: bool  # some +fp32 method decodes with the float32 copy

    def decoding_for(self, method: BenchMethod) -> Any:
        return self.float32 if method.in_float32 else self.model

    @property
    def decoding(self) -> list:
        """The models some method decodes with (the static cache is sized for each)."""
        return [self.model] + ([self.float32] if self.float32_decodes else [])

    @property
    def agreement_reference(self) -> Any | None:
        """The float32 model whose answers the agreement compares with, or None when it is not measured."""
        return self.float32 if self.measures_agreement else None


def _load_models(args: BenchArguments, options: MethodOptions, methods: dict, device: torch.device) -> RunModels:
    """Load the run's models. ``--verify_buckets`` (or the profile's) are set on the run's model: they were chosen for
    its dtype's cost curve; ``--fp32_verify_buckets`` on the float32 copy ``+fp32`` methods decode with (default: the
    engine's buckets)."""
    in_float32 = [name for name, method in methods.items() if method.in_float32]
    if in_float32 and args.dtype == "float32":
        raise BenchError(f"{', '.join(in_float32)}: +fp32 runs a method in float32 in a run of another dtype, and this "
                         "run is float32 already: drop +fp32, or pass --dtype bfloat16 to compare with bfloat16 peers")
    model, tokenizer = load_model(args.model, args.dtype, device)
    measures_agreement = measures_fp32_agreement(args, options)
    fp32_model = None
    if measures_agreement or in_float32:
        fp32_model = load_model(args.model, "float32", model.device)[0]
    if options.bucket_sizes:
        fast_path(model, buckets=options.bucket_sizes)
    if options.fp32_bucket_sizes:  # checked: some +fp32 method decodes on the fast path, so the copy is loaded
        fast_path(fp32_model, buckets=options.fp32_bucket_sizes)
    return RunModels(model, tokenizer, fp32_model, measures_agreement, bool(in_float32))


def _restarted_learning(
    methods: dict, options: MethodOptions, log: ProgressLog | None, questions: int
) -> dict[str, int]:
    """Methods that learn across calls and resume part-way (their state starts afresh in this session), with the
    questions they had finished."""
    finished = {name: sum(1 for _, method in (log.completed if log else {}) if method == name) for name in methods}
    return {name: finished[name] for name, method in methods.items()
            if method.learns_across_calls(options) and 0 < finished[name] < questions}


def _selection(args: BenchArguments) -> dict[str, Any]:
    """The question selection the report's numbers are over, all of it: a ``--per-category`` run reported without
    it read as one over every question of its categories."""
    return {"categories": args.category_names, "limit": args.limit, "per_category": args.per_category}


def _nothing_left_to_run(log: ProgressLog | None, questions: list[Question], methods: dict) -> bool:
    """Whether a resumed run finds every selected (question, method) pair in its progress file: it then runs nothing,
    not even the warm-up, so its report is the progress file's, rebuilt, and holds no warm-up compile seconds (it
    says so, as ``--report_only``'s does, rather than show a compiled method's compile time as unmeasured)."""
    return log is not None and all((q.question_id, name) in log.completed for q in questions for name in methods)


def _stored_cache_length(args: BenchArguments) -> int | None:
    """A resumed run's cache length, when --max_cache_len is not given: the progress file's (it was sized to the
    first session's questions; a resumed session may select others)."""
    path = progress_path_for(args.json)
    return read_progress(path)[0].get("options", {}).get("max_cache_len") if path.is_file() else None


def _size_static_cache(models: list, tokenizer, questions: list[Question], options: MethodOptions) -> None:
    """Set ``--max_cache_len`` to fit the questions when it is unset; when it is set, refuse before the run
    a value some question's first turn cannot be decoded in (rather than stop at that question), on any of the
    ``models`` the methods decode with (each with its own largest verification bucket)."""
    needs: dict = {}
    for model in models:
        for question_id, slots in first_turn_slots(model, tokenizer, questions, options.max_new_tokens).items():
            needs[question_id] = max(slots, needs.get(question_id, 0))
    if options.max_cache_len is None:
        options.max_cache_len = max(static_cache_length(tokenizer, questions, options.max_new_tokens), *needs.values())
    too_long = {question_id: slots for question_id, slots in needs.items() if slots > options.max_cache_len}
    if too_long:
        listed = ", ".join(f"{question_id} ({slots})" for question_id, slots in list(too_long.items())[:5])
        more = f" and {len(too_long) - 5} more" if len(too_long) > 5 else ""
        raise BenchError(
            f"--max_cache_len {options.max_cache_len} cannot hold the first turn of {len(too_long)} question(s) with "
            f"--max-new-tokens {options.max_new_tokens} (id and slots needed: {listed}{more}): pass --max_cache_len >= "
            f"{max(too_long.values())}, or leave it unset to fit the questions"
        )


def _write_outputs(report: dict[str, Any], args: BenchArguments, json_path: Path | None = None) -> None:
    """Print the Markdown table, then write the files asked for (checked before the run: :func:`check_output_paths`),
    so that a file that still cannot be written (a full disk) loses no result."""
    print(render_markdown(report))
    for path, write in ((json_path or args.json, write_json), (args.markdown, write_markdown),
                        (args.plots, write_plots)):
        if path:
            try:
                write(report, path)
            except OSError as error:
                raise BenchError(f"cannot write {path} ({error}); the report's table is printed above") from error


def _report_from_progress(args: BenchArguments, questions: list[Question], methods: list[str]) -> dict[str, Any]:
    """The report of an interrupted run, or a finished one rebuilt: the selected questions every method finished,
    from its progress file."""
    if args.json is None:
        raise BenchError("--report_only reads the progress file next to --json; pass the interrupted run's --json")
    path = progress_path_for(args.json)
    if not path.is_file():
        raise BenchError(f"--report_only: no progress file at {path}; run the benchmark with this --json first")
    stored, done = read_progress(path)
    if stored.get("questions") != str(args.questions.resolve()):
        raise BenchError(
            f"--report_only: {path} was measured on {stored.get('questions')}, not {args.questions.resolve()}; "
            "pass the run's --questions"
        )
    digest = questions_digest(load_questions(args.questions))
    if stored.get(QUESTIONS_DIGEST, digest) != digest:  # progress files before the digest: the path is all they name
        raise BenchError(
            f"--report_only: {args.questions} holds other questions than when {path} was measured (its digest "
            "changed); restore the run's question file"
        )
    finished = [q for q in questions if all((q.question_id, name) in done for name in methods)]
    if not finished:
        raise BenchError(
            f"--report_only: no selected question has every method ({', '.join(methods)}) finished in {path}"
        )
    records = [done[(question.question_id, name)] for question in finished for name in methods]
    settings = {
        **stored,
        "methods": methods,
        "reference": args.reference,
        **_selection(args),
    }
    if len(finished) < len(questions):
        settings["partial"] = (
            f"{len(finished)} of {len(questions)} selected questions, every method finished (from {path.name})"
        )
    else:  # a finished run's report rebuilt, e.g. against another --reference
        settings["rebuilt_from"] = path.name
    device = torch.device(stored.get("device", "cpu"))
    named_here = device.type != "cuda" or torch.cuda.is_available()
    report = build_report(records, settings, device if named_here else torch.device("cpu"), args.reference)
    if stored.get("machine"):  # where the numbers were measured, not the machine that rebuilds the report
        for processor_key in ("device", "instruction_set"):  # a GPU's record names no instruction set
            report["environment"].pop(processor_key, None)
        report["environment"].update(stored["machine"], num_threads=stored.get("num_threads"))
    elif not named_here:
        report["environment"]["device"] = f"{device} (not on the machine writing this report; name not recorded)"
    _write_outputs(report, args, json_path=_rebuilt_report_path(args))
    return report


def _rebuilt_report_path(args: BenchArguments, rebuilding: str = "--report_only") -> Path:
    """Where a report rebuilt from the progress file (``rebuilding``: ``--report_only``, or a ``--resume`` that finds
    nothing left to run) writes its JSON: ``--report_json``, else ``--json`` unless that is a finished run's own
    report (rebuilding it would drop the warm-up's compile seconds, which the progress file does not keep)."""
    if args.report_json is not None:
        return args.report_json
    if args.json.is_file():
        try:
            settings = read_report(args.json)["settings"]
        except BenchError:  # a file of another kind at --json: overwritten, or a raw JSONDecodeError before
            raise BenchError(f"{rebuilding} would overwrite {args.json}, which is no bench report: pass --report_json "
                             "PATH for the rebuilt report") from None
        if not settings.get("partial") and not settings.get("rebuilt_from"):
            raise BenchError(
                f"{rebuilding} would overwrite {args.json}, the finished run's own report (its warm-up compile "
                "seconds are not in the progress file): pass --report_json PATH for the rebuilt report"
            )
    return args.json


def _measured_settings(args: BenchArguments, options: MethodOptions, device: torch.device) -> dict[str, Any]:
    """What the measurements depend on: a resumed run must match the progress file on these. A run without
    the float32 agreement says so (a resumed run's later methods read the agreement from stock's records);
    progress files written before the option was added measured it, so no key means measured. A seed other than 0
    is kept likewise. So is a digest of every question in the question file, compared where the progress file holds
    one (files before 2026-12-05 do not): a resumed run may select more of them, not other ones at the same path. A
    sampled run keeps its ``generate`` sampling kwargs."""
    skipped = (
        {"fp32_agreement": False} if args.dtype != "float32" and not measures_fp32_agreement(args, options) else {}
    )
    seeded = {"seed": args.seed} if args.seed else {}  # each turn's sampling seed; files before the key: seed 0
    # the generate kwargs a sampled run samples with: files before 2026-12-05 lack them and turned off top-k and top-p
    # only (a generation_config's min-p or typical-p still truncated), so they do not resume
    sampled = {"sampling": sampling_kwargs(options.temperature)} if options.temperature else {}
    return {
        "model": args.model or DEFAULT_MODEL_ID,
        "dtype": args.dtype,
        "device": str(device),
        "num_threads": torch.get_num_threads(),
        "machine": measured_on(device),
        "warmup": args.warmup,
        "questions": str(args.questions.resolve()),
        QUESTIONS_DIGEST: questions_digest(load_questions(args.questions)),
        "options": asdict(options),
        **skipped,
        **seeded,
        **sampled,
    }
