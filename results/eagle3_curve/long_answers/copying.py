"""Does the drafter copy? Each cycle's accepted drafts against what copying the context would have given.

python results/eagle3_curve/long_answers/copying.py RUN.progress.jsonl --method "eagle3@6/8/16+sized"

The run must keep every method's tokens (`bench --keep_outputs`). For each cycle of the method's turns, the copy
length is how many of the tokens the cycle emitted (up to the tree's depth) equal the tokens that followed the most
recent earlier occurrence, in the prompt or the answer so far, of the last two tokens (the last one when two never
occurred): prompt lookup's rule (n-gram 2). A drafter that copies accepts about that many when it is long.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import torch
from transformers import AutoTokenizer

from hf_adaptive_spec.bench.conversation import turn_prompt_ids
from hf_adaptive_spec.default_model import default_model_cache_dir
from hf_adaptive_spec.generation.prompt_lookup import lookup_continuation

DEPTH = 6


def continuation_after_match(context: list[int], length: int) -> list[int]:
    """The tokens after the most recent earlier occurrence of the context's last 2 (else 1) tokens: the engine's rule."""
    return lookup_continuation(torch.tensor(context, dtype=torch.long), 2, length)


def common_prefix(first: list[int], second: list[int]) -> int:
    return next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))


def cycles_with_copy_length(
    prompt: list[int], output: list[int], accepted: list[int], before: int | None
) -> list[tuple[int, int]]:
    """(copy length, accepted drafts) per cycle; the prefill emitted output[0], so cycle 1 predicts output[1]."""
    rows, position = [], 1
    for length in accepted:
        if before is not None and position >= before:
            break
        emitted = output[position : position + DEPTH]
        copy = common_prefix(continuation_after_match(prompt + output[:position], DEPTH), emitted)
        rows.append((copy, length))
        position += length + 1
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--method", default="eagle3@6/8/16+sized")
    parser.add_argument("--questions", type=Path, default=Path("../shared/data/spec_bench/question.jsonl"))
    parser.add_argument("--before", type=int, help="only cycles starting before this answer position (128: a short run)")
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(default_model_cache_dir())
    user_turns = {q["question_id"]: q["turns"] for q in map(json.loads, args.questions.read_text().splitlines())}
    rows = [json.loads(line) for line in args.run.read_text().splitlines()[1:] if line.strip()]
    stock = {row["question_id"]: [t["output_ids"] for t in row["turns"]] for row in rows if row["method"] == "stock"}
    table = collections.defaultdict(list)
    for row in rows:
        if row["method"] != args.method:
            continue
        for turn in row["turns"]:
            answers = stock[row["question_id"]][: turn["turn"]]
            prompt = turn_prompt_ids(tokenizer, user_turns[row["question_id"]], answers)[0].tolist()
            for copy, accepted in cycles_with_copy_length(prompt, turn["output_ids"], turn["accepted_lengths"], args.before):
                table[copy].append(accepted)
    total = sum(len(v) for v in table.values())
    where = f", starting before answer position {args.before}" if args.before else ""
    print(f"{args.run}: {total} cycles of {args.method}{where}\n")
    print_copy_table(table, "cycles", "drafts accepted, mean")


def print_copy_table(table: dict[int, list[int]], unit: str, accepted_header: str) -> None:
    """One row per copy length: how many, their share, the mean accepted, and how often it reached the copy length."""
    total = sum(len(v) for v in table.values())
    print(f"| copy length (of 6) | {unit} | share | {accepted_header} | accepted ≥ copy length |")
    print("|---|---|---|---|---|")
    for copy in sorted(table):
        accepted = table[copy]
        print(f"| {copy} | {len(accepted)} | {len(accepted) / total:.1%} | {sum(accepted) / len(accepted):.2f} | "
              f"{sum(a >= copy for a in accepted) / len(accepted):.1%} |")


if __name__ == "__main__":
    main()
