"""τ of EAGLE-3 drafters on held-out conversations, offline: chains of W tokens drafted at many
prefixes of conversations the target answered itself, verified by the target in one forward.

    python examples/eagle3_window_acceptance.py \
        --checkpoints hf_adaptive_spec/checkpoints/eagle3-smollm2-135m-instruct \
        --dataset artifacts/eagle3_heldout_regenerated.jsonl --temperatures 0 1

For each drafter and temperature it prints τ(d) = 1 + mean(min(L, d)), the tokens per target
forward of chain speculation at each depth d ≤ W (L: tokens accepted from a window of W), and,
with ``--profile``, the speedup over one-token decoding that the measured costs give a chain of
depth d: ``τ(d) · T_verify(1) / (T_verify(d + 1) + d · T_draft)``. At temperature 0 the
drafter drafts its argmax and the target accepts its own argmax (greedy decoding); at 1 the
drafter samples and the target applies speculative sampling's test, averaged over several
windows per prefix. Prefixes are the same for every drafter (fixed seed).

With ``--bench-json`` the conversations are a bench run's ``stock`` outputs (exactly the tokens the
target generated for each Spec-Bench / MT-bench turn), and τ is printed per category:

    python examples/eagle3_window_acceptance.py --bench-json REPORT.json --checkpoints ...

(``REPORT.json``: the ``--json`` report of an ``hf-adaptive-spec bench`` run with ``stock`` among its methods.)
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch
from transformers import DynamicCache

import hf_adaptive_spec as hfas
from hf_adaptive_spec.bench.conversation import turn_prompt_ids
from hf_adaptive_spec.bench.errors import BenchError
from hf_adaptive_spec.bench.questions import load_questions
from hf_adaptive_spec.bench.report import read_report
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.profiling.hardware import HardwareProfile
from hf_adaptive_spec.training.eagle3.data import collate, load_samples
from hf_adaptive_spec.training.ppow import (
    WindowVerifier,
    accepted_prefix_lengths,
    draft_windows,
    first_draft_step,
    has_window,
    select_prefixes,
    window_starts,
)

#: the conversations without --bench-json (with it, every stock turn of the report, whole)
DATASET_DEFAULTS = {
    "dataset": "artifacts/eagle3_heldout_regenerated.jsonl", "num_conversations": 100, "max_length": 640
}


@torch.no_grad()
def window_acceptance(
    draft, verifier, samples, window_size, temperature, num_prefixes, group_size, seed=0
) -> torch.Tensor:
    """Accepted lengths of windows at ``num_prefixes`` random eligible prefixes of each conversation."""
    generator = torch.Generator().manual_seed(seed)
    lengths = []
    for sample in samples:
        batch = collate([sample], pad_token_id=0)
        valid = window_starts(batch["loss_mask"], window_size)
        if not valid.any():
            continue
        passed = verifier.conversations(batch["input_ids"], batch["attention_mask"])
        cache = DynamicCache()
        first = first_draft_step(draft, batch["input_ids"], passed.features, cache)
        prefixes = select_prefixes(torch.zeros(valid.shape), valid, num_prefixes, 0.0, generator)
        group = 1 if temperature == 0 else group_size
        windows = draft_windows(draft, first, cache, prefixes, group, window_size, draft.d2t,
                                temperature=temperature, generator=generator)
        verdicts = verifier.verify(passed, prefixes, windows.tokens + draft.d2t[windows.tokens])
        rule = "greedy" if temperature == 0 else "sampling"
        log_probs = windows.log_probs(temperature or 1.0)
        lengths.append(accepted_prefix_lengths(verdicts, log_probs, rule, generator).float().flatten())
    return torch.cat(lengths)


def with_windows(parser: argparse.ArgumentParser, groups: dict[str, list], window_size: int) -> dict[str, list]:
    """The groups holding a conversation whose answer fits a window, refused when none does (``torch.cat`` of no
    lengths failed raw); a group without one is named and left out of the table."""
    kept = {
        name: samples for name, samples in groups.items()
        if any(has_window(sample["loss_mask"], window_size) for sample in samples)
    }
    if not kept:
        parser.error(f"no answer holds a window of --window-size {window_size} tokens after a prefix: "
                     "give a smaller --window-size (or longer answers)")
    for name in groups.keys() - kept.keys():
        print(f"{name}: no answer holds a window of {window_size} tokens; left out", flush=True)
    return kept


def read_bench_report(parser: argparse.ArgumentParser, path: str) -> dict:
    """The ``--bench-json`` report, refused before the models load unless it is a bench report with ``stock`` records
    (another file failed in a KeyError; one without stock records printed no τ, or failed in a NameError)."""
    try:
        report = read_report(path)
    except (OSError, BenchError) as error:
        parser.error(f"--bench-json: {error}")
    if not any(isinstance(record, dict) and record.get("method") == "stock" for record in report["records"]):
        parser.error(f"--bench-json {path} holds no 'stock' records, whose answers are the conversations: bench with "
                     "--methods stock,...")
    return report


def bench_samples(report: dict, tokenizer) -> dict[str, list[dict[str, list[int]]]]:
    """One sample per turn of a bench run's ``stock`` records (prompt as the bench built it, then
    the target's answer as the loss mask), grouped by category."""
    questions = {str(q.question_id): q for q in load_questions(report["settings"]["questions"])}
    groups: dict[str, list[dict[str, list[int]]]] = defaultdict(list)
    for record in report["records"]:
        if record["method"] != "stock":
            continue
        question, answers = questions[str(record["question_id"])], []
        for turn in record["turns"]:
            prompt = turn_prompt_ids(tokenizer, question.turns, answers)[0].tolist()
            groups[record["category"]].append(
                {
                    "input_ids": prompt + turn["output_ids"],
                    "loss_mask": [0] * len(prompt) + [1] * len(turn["output_ids"]),
                }
            )
            answers.append(turn["output_ids"])
    return dict(groups)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", nargs="+", default=None, help="drafters (default: the shipped one)")
    parser.add_argument("--dataset", default=None,
                        help=f"JSONL of target-answered conversations (default: {DATASET_DEFAULTS['dataset']})")
    parser.add_argument("--num-conversations", type=int, default=None,
                        help=f"the first N (default: {DATASET_DEFAULTS['num_conversations']})")
    parser.add_argument("--window-size", type=int, default=6)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--prefixes", type=int, default=16, help="prefixes per conversation")
    parser.add_argument("--group-size", type=int, default=4, help="sampled windows per prefix at temperature > 0")
    parser.add_argument("--max-length", type=int, default=None,
                        help=f"tokens per conversation (default: {DATASET_DEFAULTS['max_length']})")
    parser.add_argument("--bench-json", default=None, help="use a bench run's stock outputs, per category")
    parser.add_argument("--profile", default=None, help="hf-adaptive-spec profile JSON, for modelled chain speedups")
    args = parser.parse_args()
    given = ["--" + name.replace("_", "-") for name in DATASET_DEFAULTS if getattr(args, name) is not None]
    if args.bench_json and given:
        parser.error(f"--bench-json takes every stock turn of the report, whole: {', '.join(given)} would be ignored; "
                     "give them without --bench-json")
    for name, value in DATASET_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    report = read_bench_report(parser, args.bench_json) if args.bench_json else None
    model, tokenizer = hfas.load_default_model()
    groups = (
        bench_samples(report, tokenizer)
        if report
        else {"all": load_samples(tokenizer, args.dataset, args.max_length, args.num_conversations)}
    )
    groups = with_windows(parser, groups, args.window_size)
    profile = HardwareProfile.load(args.profile) if args.profile else None
    print(f"{sum(map(len, groups.values()))} conversations, windows of {args.window_size}, "
          f"{args.prefixes} prefixes each")
    for checkpoint in args.checkpoints or [hfas.shipped_checkpoint("eagle3")]:
        draft = Eagle3DraftModel.from_pretrained(checkpoint, target=model).float().eval()
        verifier = WindowVerifier(model, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
        for temperature in args.temperatures:
            lengths = {
                name: window_acceptance(
                    draft, verifier, samples, args.window_size, temperature, args.prefixes, args.group_size
                )
                for name, samples in groups.items()
            }
            if len(lengths) > 1:
                lengths["all"] = torch.cat(list(lengths.values()))
            for name, values in lengths.items():
                taus = [1 + values.clamp(max=depth).mean().item() for depth in range(1, args.window_size + 1)]
                print(f"{checkpoint}  T={temperature:g}  {name}: tau by chain depth 1..{args.window_size}: "
                      + " ".join(f"{tau:.3f}" for tau in taus), flush=True)
            if profile is not None:
                speedups = [
                    tau * profile.verify_time(1) / (profile.verify_time(depth + 1) + depth * profile.draft_step_seconds)
                    for depth, tau in enumerate(taus, start=1)
                ]
                print("    modelled chain speedup by depth (all): " + " ".join(f"{s:.2f}" for s in speedups),
                      flush=True)

if __name__ == "__main__":
    main()
