"""τ of a bench run at Spec-Bench's own answer length, by position in the answer and against a 128-token run.

python results/eagle3_curve/long_answers/analyse.py RUN.progress.jsonl --method "eagle3@6/8/16+sized" \
    --short results/eagle3_curve/stage15_specbench130_bf16_compiled_epyc.json

τ is pooled over cycles as the bench pools it ((accepted + 1) summed over cycles / cycles). A cycle belongs to the
position bucket its first token lands in (the prefill's token is position 0, so the first cycle starts at 1).
A turn "loops" when its last 256 tokens hold fewer than half as many distinct 8-grams as 8-gram positions: the
greedy answer repeats itself, which makes drafting easy and is not what a reader of τ has in mind.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

BUCKETS = [(1, 128), (128, 256), (256, 512), (512, 1024)]
MT_BENCH = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}


def records(path: Path, method: str) -> list[dict]:
    """The method's question records from a progress file (JSONL) or a finished report (JSON)."""
    text = path.read_text()
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in text.splitlines()[1:] if line.strip()]
    else:
        rows = json.loads(text)["records"]
    return [row for row in rows if row["method"] == method]


def loops(tokens: list[int], tail: int = 256, n: int = 8) -> bool:
    window = tokens[-tail:]
    grams = [tuple(window[i : i + n]) for i in range(len(window) - n + 1)]
    return len(window) >= tail and len(set(grams)) < 0.5 * len(grams)


def tau(accepted: list[int]) -> tuple[int, int]:
    """(tokens, cycles) of a list of accepted lengths."""
    return sum(accepted) + len(accepted), len(accepted)


def by_position(accepted: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
    out: dict[tuple[int, int], list[int]] = collections.defaultdict(list)
    position = 1
    for length in accepted:
        bucket = next(b for b in BUCKETS if b[0] <= position < b[1] or b == BUCKETS[-1])
        out[bucket].append(length)
        position += length + 1
    return {bucket: tau(lengths) for bucket, lengths in out.items()}


def pooled(pairs) -> float | None:
    pairs = list(pairs)
    tokens = sum(t for t, _ in pairs)
    cycles = sum(c for _, c in pairs)
    return tokens / cycles if cycles else None


def fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--method", default="eagle3@6/8/16+sized")
    parser.add_argument("--short", type=Path, help="a 128-token report with the same method, for the same questions")
    args = parser.parse_args()
    rows = records(args.run, args.method)
    turns = [(row["question_id"], row["category"], turn) for row in rows for turn in row["turns"]]
    part = {"all": turns, "MT-bench": [t for t in turns if t[1] in MT_BENCH],
            "other five": [t for t in turns if t[1] not in MT_BENCH]}
    print(f"{args.run}: {len(rows)} questions, {len(turns)} turns of {args.method}\n")
    print("| part | turns | mean length | at the cap | looping | τ | τ without looping turns | "
          + " | ".join(f"τ at {a}–{b - 1}" for a, b in BUCKETS) + " |")
    print("|---|---|---|---|---|---|---|" + "---|" * len(BUCKETS))
    for name, chosen in part.items():
        if not chosen:
            continue
        cap = max(t[2]["new_tokens"] for t in turns)
        looping = [t for t in chosen if loops(t[2]["output_ids"])]
        buckets = [pooled(by_position(t[2]["accepted_lengths"]).get(b, (0, 0)) for t in chosen) for b in BUCKETS]
        print(f"| {name} | {len(chosen)} | {sum(t[2]['new_tokens'] for t in chosen) / len(chosen):.0f} | "
              f"{sum(t[2]['new_tokens'] >= cap for t in chosen)} | {len(looping)} | "
              f"{fmt(pooled(tau(t[2]['accepted_lengths']) for t in chosen))} | "
              f"{fmt(pooled(tau(t[2]['accepted_lengths']) for t in chosen if t not in looping))} | "
              + " | ".join(fmt(b) for b in buckets) + " |")
    by_category = collections.defaultdict(list)
    for t in turns:
        by_category[t[1]].append(tau(t[2]["accepted_lengths"]))
    print("\nτ by category: " + ", ".join(f"{c} {pooled(v):.2f}" for c, v in
                                          sorted(by_category.items(), key=lambda kv: -pooled(kv[1]))))
    if args.short:
        ids = {row["question_id"] for row in rows}
        short = [turn for row in records(args.short, args.method) if row["question_id"] in ids for turn in row["turns"]]
        print(f"\nthe same {len(ids)} questions at 128 tokens ({args.short}): τ "
              f"{fmt(pooled(tau(turn['accepted_lengths']) for turn in short))} over {len(short)} turns")


if __name__ == "__main__":
    main()
