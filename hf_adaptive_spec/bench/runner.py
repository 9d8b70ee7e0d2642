"""The Spec-Bench loop: warm-up, then every method on each question in turn, timed and checked."""

from __future__ import annotations

import zlib

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..core.sequences import common_prefix_length
from ..core.timing import timed
from .conversation import turn_prompt_ids
from .counting import TargetPassCounter
from .methods import REFERENCE_METHOD, BenchMethod, SpeculationStatsLike
from .progress import ProgressLog
from .questions import Question
from .records import POLICY_FIT_REPORTS, QuestionRecord, TurnRecord


def run_benchmark(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    questions: list[Question],
    methods: dict[str, BenchMethod],
    warmup: int = 0,
    log: ProgressLog | None = None,
    show_progress: bool = False,
    seed: int = 0,
    check_identity: bool = True,
    fp32_model: PreTrainedModel | None = None,
    warmup_seconds: dict[str, list[list[float]]] | None = None,
    keep_outputs: bool = False,
) -> list[QuestionRecord]:
    """Run every prepared method on every question; return one record per (question, method).

    For each question ``stock`` runs first: its answers build the later turns' conversation
    for all methods and are the reference of the greedy identity check. The other methods
    follow in an order rotated by one place per question, so that none always runs right
    after ``stock`` and any effect of the position is shared out evenly. Pairs already in
    ``log`` are not run again. Every method's turn starts from the same torch seed (a function
    of ``seed``, the question and the turn), so sampled runs are reproducible and resumable.

    Args:
        model: the target model the methods were prepared with.
        tokenizer: its tokenizer (with a chat template).
        questions: the questions, in order.
        methods: prepared methods by name; must include ``stock``.
        warmup: untimed generations per method on the first question before timing (compiled
            methods compile their graphs here).
        log: progress file receiving each finished record, and holding those to skip.
        show_progress: draw a tqdm progress bar.
        seed: the seed each turn's seed is derived from.
        check_identity: compare each output with ``stock``'s (greedy decoding); when False
            (sampling) the records' ``identical`` is None.
        fp32_model: the float32 copy of a lower-precision ``model``: each turn's stock prompt is
            also answered by it (untimed), and every method's agreement with that answer recorded.
        warmup_seconds: receives each method's warm-up call durations, one list per cache length.
        keep_outputs: keep every method's generated tokens in its records (``stock``'s are always kept:
            a resumed run builds later turns from them).
    """
    if REFERENCE_METHOD not in methods:
        raise ValueError(f"methods must include {REFERENCE_METHOD!r}, the reference of the identity check")
    done = dict(log.completed) if log is not None else {}
    pending = _pending_runs(questions, list(methods), done)
    reference_answer = _Fp32Reference(fp32_model, methods[REFERENCE_METHOD]) if fp32_model is not None else None
    compiled = any(method.static_cache is not None for method in methods.values())
    counter = TargetPassCounter(None if compiled else model)  # a hook's side effect would split compiled graphs
    try:
        if pending and warmup:
            prompt = turn_prompt_ids(tokenizer, questions[0].turns, []).to(model.device)
            times = _warm_up(methods, prompt, warmup, reference_answer)
            if warmup_seconds is not None:
                warmup_seconds.update(times)
        for question, name in tqdm(pending, desc="bench", unit="run", disable=not show_progress):
            reference = done.get((question.question_id, REFERENCE_METHOD))
            record = _run_question(
                name, methods[name], tokenizer, question, reference, counter, model.device, seed, check_identity,
                reference_answer,
            )
            if not (keep_outputs or name == REFERENCE_METHOD):
                for turn in record.turns:
                    turn.output_ids = None
            done[record.key] = record
            if log is not None:
                log.append(record)
    finally:
        counter.close()
    order = [REFERENCE_METHOD] + [name for name in methods if name != REFERENCE_METHOD]
    return [done[(question.question_id, name)] for question in questions for name in order]


def _pending_runs(questions: list[Question], names: list[str], done: dict) -> list[tuple[Question, str]]:
    """(question, method) pairs still to run: ``stock`` first for each question, then the others in
    an order rotated by one place per question."""
    others = [name for name in names if name != REFERENCE_METHOD]
    return [
        (question, name)
        for index, question in enumerate(questions)
        for name in [REFERENCE_METHOD] + _rotated(others, index)
        if (question.question_id, name) not in done
    ]


def _warm_up(
    methods: dict[str, BenchMethod], prompt: torch.LongTensor, calls: int, reference_answer: _Fp32Reference | None
) -> dict[str, list[list[float]]]:
    """Untimed calls per method and cache length (``+sized`` decodes in several), then of the float32 reference (timed
    beside stock later: its first calls' one-off costs go here); returns each compiled method's calls' seconds (its
    first call in each length holds its compile; an eager method's holds none)."""
    seconds = {}
    for name, method in methods.items():
        calls_seconds = method.warm_up(prompt, calls)
        if method.static_cache is not None:
            seconds[name] = calls_seconds
    for _ in range(calls if reference_answer is not None else 0):
        reference_answer(prompt)
    return seconds


class _Fp32Reference:
    """The float32 stock answer to a prompt, with the stock method's decoding settings, and its seconds (eager
    float32 ``generate``, timed as the methods are: the peer "eager float32 stock")."""

    def __init__(self, fp32_model: PreTrainedModel, stock: BenchMethod):
        self.model, self.stock = fp32_model, stock

    def __call__(self, input_ids: torch.LongTensor) -> tuple[list[int], float]:
        device = self.model.device
        inputs = input_ids.to(device)
        sequences, seconds = timed(device, lambda: self.model.generate(input_ids=inputs, **self.stock.generate_kwargs))
        return sequences[0, input_ids.shape[1] :].tolist(), seconds


def _rotated(names: list[str], shift: int) -> list[str]:
    shift = shift % len(names) if names else 0
    return names[shift:] + names[:shift]


def _run_question(
    name: str,
    method: BenchMethod,
    tokenizer: PreTrainedTokenizerBase,
    question: Question,
    reference: QuestionRecord | None,
    counter: TargetPassCounter,
    device: torch.device,
    seed: int,
    check_identity: bool,
    fp32_reference: _Fp32Reference | None = None,
) -> QuestionRecord:
    """All turns of ``question``; ``reference`` is None when ``method`` is the reference itself."""
    answers = [] if reference is None else [turn.output_ids for turn in reference.turns]
    record = QuestionRecord(question.question_id, question.category, name)
    for index in range(len(question.turns)):
        input_ids = turn_prompt_ids(tokenizer, question.turns, answers[:index]).to(device)
        counter.reset()
        torch.manual_seed(turn_seed(seed, question.question_id, index))
        (tokens, stats), seconds = timed(device, lambda: method.generate(input_ids))  # noqa: B023 (called here)
        is_reference = reference is None
        if is_reference:
            answers.append(tokens)
        expected = answers[index] if check_identity else None
        passes = None if method.in_float32 else counter.count  # the counter hooks the run's model, not its float32 copy
        turn = _turn_record(index, tokens, expected, seconds, passes, stats)
        if fp32_reference is not None:
            if is_reference:
                turn.fp32_reference_ids, turn.fp32_reference_seconds = fp32_reference(input_ids)
            fp32_answer = turn.fp32_reference_ids if is_reference else reference.turns[index].fp32_reference_ids
            _set_fp32_agreement(turn, tokens, fp32_answer)
        record.turns.append(turn)
    return record


def _set_fp32_agreement(turn: TurnRecord, tokens: list[int], fp32_answer: list[int]) -> None:
    turn.fp32_identical = tokens == fp32_answer
    turn.fp32_agreement = common_prefix_length(tokens, fp32_answer) / len(fp32_answer) if fp32_answer else 1.0


def _turn_record(
    index: int,
    tokens: list[int],
    expected: list[int] | None,
    seconds: float,
    target_passes: int | None,
    stats: SpeculationStatsLike | None,
) -> TurnRecord:
    mismatch = None if expected is None else _first_mismatch(tokens, expected)
    compile_time = getattr(stats, "compile_time", None)
    return TurnRecord(
        turn=index,
        new_tokens=len(tokens),
        wall_time=seconds - (compile_time or 0.0),  # a graph compiled mid-run is not decoding time
        compile_time=compile_time,
        identical=None if expected is None else mismatch is None,
        first_mismatch=mismatch,
        target_passes=target_passes,
        accepted_lengths=list(stats.accepted_lengths) if stats is not None else None,
        draft_depths=list(stats.draft_depths) if stats is not None else None,
        verified_tokens=list(stats.verified_tokens) if stats is not None else None,
        draft_time=stats.draft_time if stats is not None else None,
        draft_times=_per_cycle(stats, "draft_times"),
        verify_time=stats.verify_time if stats is not None else None,
        verify_times=_per_cycle(stats, "verify_times"),
        policy_time=stats.policy_time if stats is not None else None,
        output_ids=tokens,
        **{report: getattr(stats, report, None) for report in POLICY_FIT_REPORTS},
        capped_trees=getattr(stats, "capped_trees", None),
    )


def _per_cycle(stats: SpeculationStatsLike | None, name: str) -> list[float] | None:
    """A per-cycle list of the speculation stats (``draft_times``, ``verify_times``), None where they hold none."""
    values = getattr(stats, name, None)
    return None if values is None else list(values)


def turn_seed(seed: int, question_id: int | str, turn: int) -> int:
    """The torch seed every method's ``turn`` of ``question_id`` starts from (stable across runs)."""
    return zlib.crc32(f"{seed}:{question_id}:{turn}".encode())


def _first_mismatch(tokens: list[int], expected: list[int]) -> int | None:
    """Index of the first differing token (a length difference counts), or None when equal."""
    return None if tokens == expected else common_prefix_length(tokens, expected)
