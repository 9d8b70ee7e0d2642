"""``hf-adaptive-spec profile``: measure this machine's hardware cost profile."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from transformers import PreTrainedModel

from ..checkpoints import shipped_checkpoint
from ..core.cost_curve import CONVERTS_BFLOAT16, FLOAT32_ENGINE_MEASURED, converts_bfloat16, instruction_set_of
from ..default_model import DEFAULT_MODEL_ID, load_chat_model_for_option
from ..drafters import CausalLMDrafter, Eagle3Drafter
from ..drafters.base import Drafter
from ..environments import load_recording
from ..environments.provenance import check_recorded_drafter_weights, load_profile_for_recordings, recorded_pair
from ..environments.recorded import check_same_models
from ..environments.static_grid import check_measured_sizes, lookup_counts_from_text
from ..environments.storage import recording_manifest
from ..generation import enable, fast_path, fast_path_compile_config
from ..generation.static_path import DEFAULT_BUCKETS
from ..hub.errors import ArtifactError
from ..policies import StaticTreePolicy
from .arguments import (
    BUCKET_RUN_TOKENS,
    FEWEST_LARGEST_BUCKET,
    check_cache_slots,
    check_sizes,
    checked_profile_path,
    parse_buckets,
    refuse_timing_flags,
    tokens_after_context,
    with_recorded_sizes,
)
from .hardware import DEFAULT_VERIFY_TOKENS, HardwareProfile, static_cache_slots
from .identity import eagle3_name, model_name
from .measure import (
    measure_buckets_in_generate,
    measure_catch_up_in_generate,
    measure_in_generate,
    measure_static_verification,
    measure_verification_in_generate,
)
from .ranking import check_recorded_positions, recommend, recommendation_lines, shipped_branch_lengths
from .recommendation import default_profile_path

PROMPT = "Explain how a bicycle works, step by step."


class ProfileSetupError(Exception):
    """A model, tokenizer or drafter the profile cannot time, found once they load and before any timing: reported as
    one line."""


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-adaptive-spec profile", description=__doc__)
    parser.add_argument("--json", default=None, help=f"where to write the profile (default: {default_profile_path()})")
    parser.add_argument("--model", default=None,
                        help="model folder or Hub id (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--device", default="auto",
                        help="where to time the target and drafter: auto (CUDA when available, else the CPU), cpu, "
                             "cuda, cuda:N (as bench --device); the profile records it, and is refused for a model on "
                             "another device type")
    parser.add_argument("--num-threads", type=int, default=None,
                        help="torch CPU threads to time with (default: torch's); the profile records them, and "
                             "recommended_generate_kwargs() warns in a process of other threads")
    parser.add_argument("--context-length", type=int, default=256)
    parser.add_argument("--verify-tokens", default=",".join(map(str, DEFAULT_VERIFY_TOKENS)),
                        help="verification sizes to time; with --recording, 1 (a plain step) and each recording's "
                             "total_tokens (on the eager path, alone and plus each --lookup-tokens length and the "
                             "shipped policies' trained branch) are added")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timings per verification size (eager: a third of it, at least 3, rounds of generate)")
    parser.add_argument("--eagle3", default=None,
                        help="EAGLE-3 drafter checkpoint to time (default: the --recording's drafter, "
                             "else an early exit)")
    parser.add_argument("--drafter-layers", type=int, default=8,
                        help="early-exit drafter layers, without --eagle3 (fewer than the target has)")
    parser.add_argument("--static", action="store_true", help="the static-cache path (cache_implementation='static')")
    parser.add_argument("--compile", action="store_true", help="the compiled static-cache path (implies --static)")
    parser.add_argument("--cache-slots", type=int, default=None,
                        help="static path: the StaticCache length to time in (attention covers every slot: use the one "
                             "you generate with; default: the engine's own for --context-length)")
    parser.add_argument("--buckets", default=None,
                        help="static path: the verification buckets to time and rank trees on, >= 2 each and the "
                             f"largest >= {FEWEST_LARGEST_BUCKET} (a tree is padded to the next one; where a "
                             "many-token forward costs many tokens, e.g. bfloat16 without matrix instructions, smaller "
                             "ones such as 2,3,4,8 can win; generate with hfas.fast_path(model, "
                             "buckets=hfas.recommended_buckets(model=model))). Default: the engine's "
                             f"{','.join(map(str, DEFAULT_BUCKETS))}, plus 1 + each --lookup-tokens length, the "
                             "size of a cycle that verifies the lookup chain alone (LookupFirstPolicy where the "
                             "branch matched)")
    parser.add_argument("--recording", action="append", default=[],
                        help="`hf-adaptive-spec record` folder to rank the static trees and shipped policies on "
                             "(repeatable)")
    parser.add_argument("--lookup-tokens", default=None,
                        help="prompt-lookup branch lengths to rank every tree with, e.g. 0,1,2,4 (0, no branch, is "
                             "always ranked; depth 0 with a branch is the branch alone, without drafting); the "
                             "recommendation names the winner's, for generate's prompt_lookup_num_tokens. Default: 0 "
                             "(no branch); with --rerank, the lengths the profile's recommendation was ranked with")
    parser.add_argument("--rerank", action="store_true",
                        help="rank the --recording folders on the costs already in the profile at --json (nothing is "
                             "loaded or timed; the timing options are refused) and replace its recommendation: for "
                             "recordings that follow your use better, e.g. `record --turns 2`")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.rerank:
        refuse_timing_flags(parser, args, sys.argv[1:] if argv is None else argv)
    check_sizes(parser, args)
    profile_path = checked_profile_path(parser, args.json)
    args.buckets = parse_buckets(parser, args)
    try:  # a bad folder fails before minutes of timing
        recordings = [load_recording(path) for path in args.recording]
        check_recorded_positions(recordings, args.recording)
        check_same_models(recordings, "ranked together")
    except (OSError, ValueError) as error:
        parser.error(f"--recording: {error}")
    if args.rerank:
        return rerank(parser, args, recordings, profile_path)
    eager_lookup = () if args.static or args.compile else {*args.lookup_tokens, *shipped_branch_lengths(None)}
    args.verify_tokens = with_recorded_sizes(args.verify_tokens, recordings, sorted(eager_lookup))
    if args.cache_slots is not None:
        check_cache_slots(parser, args)
    if args.recording:
        time_the_recorded_pair(parser, args)
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    try:
        profile, compile_seconds = measure_profile(args)
    except ProfileSetupError as error:  # a model that does not load, a drafter of another target: one line
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    try:
        check_recorded_drafter_weights(profile.drafter_weights, args.recording, "This profile")
    except ValueError as error:
        parser.error(str(error))
    if recordings:
        profile.recommendation = recommend(profile, recordings, args.recording, args.lookup_tokens)
    report = profile_report(profile, profile_path, compile_seconds if args.compile else None)  # before saving:
    profile_path.parent.mkdir(parents=True, exist_ok=True)  # a report that fails leaves no profile behind to be used
    profile.save(profile_path)
    print("\n".join(report))
    return 0


def profile_report(profile: HardwareProfile, path: Path, compile_seconds: float | None) -> list[str]:
    """What was timed, where it is saved, and the recommendation, as lines."""
    base_tokens, base = profile.verify_tokens[0], profile.verify_seconds[0]
    unit = "one token" if base_tokens == 1 else f"{base_tokens} tokens"
    lines = [f"verify {n:>3} tokens: {1000 * s:7.1f} ms  ({s / base:.2f}x {unit})"
             for n, s in zip(profile.verify_tokens, profile.verify_seconds)]
    if profile.buckets:
        lines.append(f"buckets: {profile.buckets} in a cache of {profile.cache_slots} slots (a tree is padded to the "
                     "smallest bucket that fits it and costs that bucket's time)")
        lines += [f"bucket {bucket:>3} inside generate: {1000 * seconds:7.1f} ms per cycle (what the replay charges)"
                  for bucket, seconds in zip(profile.buckets, profile.bucket_seconds or [])]
    lines.append(f"draft step: {1000 * profile.draft_step_seconds:.1f} ms   policy call: "
                 f"{1000 * profile.policy_call_seconds:.3f} ms   -> {path}")
    lines.append(f"timed on {profile.device} in {profile.dtype} ({profile.path} path), "
                 f"{profile.num_threads} CPU threads")
    lines.append("a drafting cycle's first step, by the committed tokens it reads: " + ", ".join(
        f"{tokens:.0f}: {1000 * seconds:.1f} ms"
        for tokens, seconds in zip(profile.catch_up_tokens, profile.catch_up_seconds)))
    if compile_seconds is not None:
        lines.append(f"path: compiled ({compile_seconds:.0f} s compiling {len(profile.verify_tokens)} verification "
                     "graphs)")
    return lines + instruction_set_lines(profile) + recommendation_lines(profile)


def rerank(parser: argparse.ArgumentParser, args: argparse.Namespace, recordings: list, path: Path) -> int:
    """``--rerank``: the recommendation of the profile at ``path`` (``--json``) remade on ``recordings`` with its own
    costs, refused for recordings of another target or drafter than it timed; without ``--lookup-tokens``, with the
    prompt-lookup branch lengths it was ranked with (:func:`ranked_lookup_counts`)."""
    if not recordings:
        parser.error("--rerank ranks --recording folders on a profile's costs: pass at least one --recording")
    if not path.is_file():
        parser.error(f"--rerank reads the profile at {path}, and there is none: time this machine once with "
                     "`hf-adaptive-spec profile --recording DIR` (without --rerank)")
    try:
        profile = load_profile_for_recordings(path, args.recording)
        check_measured_sizes(profile, recordings, args.recording)
    except ValueError as error:
        parser.error(str(error))
    counts = args.lookup_tokens if args.lookup_tokens is not None else ranked_lookup_counts(parser, profile, path)
    profile.recommendation = recommend(profile, recordings, args.recording, counts)
    lines = recommendation_lines(profile)  # before saving, as main
    profile.save(path)
    as_before = ("" if args.lookup_tokens is not None else
                 f" with the prompt-lookup branch lengths {list(counts)} it was ranked with (--lookup-tokens ranks "
                 "others)")
    print(f"ranked {', '.join(args.recording)} on the costs of {path} ({profile.device}, {profile.dtype}, "
          f"{profile.path} path){as_before}")
    print("\n".join(lines))
    return 0


def ranked_lookup_counts(parser: argparse.ArgumentParser, profile: HardwareProfile, path: Path) -> tuple[int, ...]:
    """The prompt-lookup branch lengths ``profile``'s recommendation was ranked with (its ``lookup_counts``; a profile
    written before they were kept: no branch and the one it recommends), which ``--rerank`` without
    ``--lookup-tokens`` ranks with again rather than drop a branch; none for a profile without a recommendation."""
    recommendation = profile.recommendation or {}
    stored = recommendation.get("lookup_counts", [0, recommendation.get("lookup_tokens") or 0])
    try:
        if not isinstance(stored, list) or not all(isinstance(count, int) for count in stored):
            raise ValueError(f"expected a list of branch lengths, got {stored!r}")
        return lookup_counts_from_text(",".join(map(str, sorted(set(stored)))))
    except ValueError as error:
        parser.error(f"--rerank reads the prompt-lookup branch lengths the profile {path} was ranked with, and its "
                     f"recommendation's lookup_counts are not such ({error}): pass --lookup-tokens 0,1,4 (the "
                     "lengths to rank)")


def instruction_set_lines(profile: HardwareProfile) -> list[str]:
    """A CPU's matrix instruction set, and what it means for bfloat16 (``cpu_instruction_set``), with what this
    profile measured a many-token forward to cost."""
    if profile.instruction_set is None:
        return []
    lines = [f"instruction set: {profile.instruction_set}"]
    if converts_bfloat16(profile.dtype, profile.instruction_set):
        lines.append(
            f"this CPU {CONVERTS_BFLOAT16}, so a forward over many tokens costs several of one token's"
            f"{measured_many_token_cost(profile)} "
            f"and a draft tree pays for little of itself; profile --dtype float32 too ({FLOAT32_ENGINE_MEASURED})"
        )
    return lines


def measured_many_token_cost(profile: HardwareProfile) -> str:
    """`` (here 8 tokens cost 2.25x one token's)``: the largest verification size up to 8 this profile timed against
    one token, or nothing when it timed no such pair (8 tokens: 3.85x on an AVX2-only EPYC, 2.25x on an AVX-512 Xeon
    without AVX512-BF16, 1.43x on an AMX Xeon; results/README.md)."""
    seconds = dict(zip(profile.verify_tokens, profile.verify_seconds))
    many = max((n for n in seconds if 1 < n <= 8), default=None)
    if 1 not in seconds or many is None:
        return ""
    return f" (here {many} tokens cost {seconds[many] / seconds[1]:.2f}x one token's)"


def time_the_recorded_pair(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Time the target and drafter the recordings were made with: ``--eagle3`` defaults to theirs, and another
    target or drafter is refused (the ranking would weigh one drafter's acceptance with another's costs).
    Recordings saved without ``record``'s manifest name neither, and are taken as made with what is timed."""
    pairs = {pair for pair in map(recorded_pair, args.recording) if pair is not None}
    if not pairs:
        return
    if len(pairs) > 1:
        names = {name for pair in pairs for name in pair}
        parser.error(f"the recordings were made with different targets or drafters ({sorted(names)}): "
                     "rank one pair's recordings per profile")
    ((recorded_model, recorded_drafter),) = pairs
    if model_name(args.model or DEFAULT_MODEL_ID) != recorded_model:
        parser.error(f"the recordings are of the target {recorded_model}, not {args.model or DEFAULT_MODEL_ID}: "
                     "pass --model with the recorded target")
    if args.eagle3 is None:
        manifests = [manifest for manifest in map(recording_manifest, args.recording) if manifest is not None]
        args.eagle3 = next(m.get("eagle3_checkpoint") for m in manifests) or str(shipped_checkpoint("eagle3"))
    elif eagle3_name(args.eagle3) != recorded_drafter:
        parser.error(f"the recordings were drafted by {recorded_drafter}, not --eagle3 {args.eagle3}: time the "
                     "recorded drafter (leave --eagle3 out) or record with this one")


def measure_profile(args: argparse.Namespace) -> tuple[HardwareProfile, float]:
    """Verification times on the chosen path, then a drafter's step and a policy call inside ``generate``, on
    ``--device`` (the target, the drafter and the prompts loaded there first, and checked: :func:`load_timed_pair`)."""
    model, drafter, ids, long_ids = load_timed_pair(args)
    sizes = tuple(int(n) for n in args.verify_tokens.split(","))
    path, generate_kwargs, compile_seconds, buckets, slots = "eager", {}, 0.0, None, None
    if args.static or args.compile:
        compile_config = fast_path_compile_config(model.device) if args.compile else None
        options = compile_config.to_dict() if compile_config is not None else None
        buckets = list(args.buckets)  # what the engine pads trees to: each is measured
        fast_path(model, buckets=args.buckets)
        sizes = tuple(sorted(set(sizes) | set(buckets)))
        slots = args.cache_slots or static_cache_slots(args.context_length, tokens_after_context(sizes, args.buckets))
        tokens, seconds, compile_seconds = measure_static_verification(
            model, args.context_length, sizes, args.repeats, options, cache_slots=slots
        )
        path = "compiled" if args.compile else "static"
        # --static times the eager static path: on a GPU generate would compile a static cache on its own
        generate_kwargs = {"cache_implementation": "static",
                           **({"compile_config": compile_config} if args.compile else {"disable_compile": True})}
    else:  # timed inside generate, with the drafter
        tokens, seconds = list(sizes), None
    policy = StaticTreePolicy(depth=4, top_k=4, total_tokens=min(12, buckets[-1]) if buckets else 12)  # not capped
    measure_in_generate(model, ids, drafter, policy, max_new_tokens=8, **generate_kwargs)  # warm-up (compiles)
    if seconds is None:
        seconds = measure_verification_in_generate(model, long_ids, drafter, tokens, rounds=max(3, args.repeats // 3))
    draft_step, policy_call = measure_in_generate(
        model, long_ids, drafter, policy, max_new_tokens=BUCKET_RUN_TOKENS, **generate_kwargs
    )
    catch_up_tokens, catch_up_seconds = measure_catch_up_in_generate(
        model, long_ids, drafter, max_new_tokens=BUCKET_RUN_TOKENS, **generate_kwargs
    )
    bucket_seconds = None
    if buckets:  # what a cycle pays for each bucket, after as much context and in as long a cache as the forwards'
        generate_kwargs.pop("cache_implementation")
        bucket_seconds = measure_buckets_in_generate(
            model, long_ids, drafter, buckets, slots, rounds=max(3, args.repeats // 3),
            **generate_kwargs,
        )
    profile = HardwareProfile(
        device=str(model.device), dtype=args.dtype, num_threads=torch.get_num_threads(),
        context_length=args.context_length,
        verify_tokens=tokens, verify_seconds=seconds, draft_step_seconds=draft_step, policy_call_seconds=policy_call,
        catch_up_tokens=catch_up_tokens, catch_up_seconds=catch_up_seconds,
        path=path, buckets=buckets, bucket_seconds=bucket_seconds, cache_slots=slots, model=model_name(model),
        drafter=eagle3_name(args.eagle3) if args.eagle3 else f"early exit: {args.drafter_layers} layers",
        drafter_weights=drafter.weights_digest() if args.eagle3 else None,
        instruction_set=instruction_set_of(model.device),
    )
    return profile, compile_seconds


def load_timed_pair(args: argparse.Namespace) -> tuple[PreTrainedModel, Drafter, torch.LongTensor, torch.LongTensor]:
    """``(target, drafter, prompt ids, long prompt ids)`` to time: the target in ``--dtype`` on ``--device``, the
    ``--eagle3`` drafter (else an early exit of ``--drafter-layers``) and the chat-templated profile prompt, short and
    of about ``--context-length`` tokens (a later level's cost grows with the context it reads), on the device. What
    fails once they load (a model not found or not reachable, a tokenizer without a chat template, a drafter built
    for another target, more early-exit layers than the target has) fails here, before minutes of timing and
    compiling, as a :class:`ProfileSetupError` naming the option."""
    model, tokenizer = load_chat_model_for_option(
        args.model, getattr(torch, args.dtype),
        "the profile times a chat-templated prompt (as `record` prompts the model)", ProfileSetupError,
    )
    model = enable(model.to(args.device))
    try:
        drafter = (Eagle3Drafter.from_pretrained(args.eagle3, target=model) if args.eagle3
                   else CausalLMDrafter.from_target_layers(model, args.drafter_layers))
    except (ArtifactError, OSError, ValueError) as error:  # a drafter of another target, too many layers
        option = f"--eagle3 {args.eagle3}" if args.eagle3 else f"--drafter-layers {args.drafter_layers}"
        raise ProfileSetupError(f"{option}: {error}") from error
    ids, long_ids = prompt_ids(tokenizer), long_prompt(tokenizer, args.context_length)
    return model, drafter, ids.to(model.device), long_ids.to(model.device)


def prompt_ids(tokenizer, repeats: int = 1) -> torch.LongTensor:
    """``[1, T]``: the chat-templated profile prompt, its request ``repeats`` times."""
    messages = [{"role": "user", "content": " ".join([PROMPT] * repeats)}]
    return tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]


def long_prompt(tokenizer, context_length: int) -> torch.LongTensor:
    """``[1, about context_length]``: the chat-templated profile prompt, its request repeated to about
    ``context_length`` tokens, once at least (what a bucket costs depends a little on the context before it)."""
    once = prompt_ids(tokenizer).shape[1]
    per_repeat = max(prompt_ids(tokenizer, 2).shape[1] - once, 1)
    return prompt_ids(tokenizer, max(1, 1 + (context_length - once) // per_repeat))
