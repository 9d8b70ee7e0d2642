"""Plot DVI's acceptance over the training prompt stream from ``trainers/dvi.py`` logs.

    python examples/plot_dvi_stream.py --log "KL->RL=artifacts/dvi_train.log" \
        --log "KL only=artifacts/dvi_kl_only_train.log" --output results/dvi_acceptance_stream.png

Each log line the Trainer prints (a dict every ``logging_steps`` prompts) carries the mean of
``acceptance_rate`` (accepted / drafted tokens) and ``mean_accepted_tokens`` (τ) over those
prompts. The plot shows both against prompts seen, with a moving average over ``--window`` lines.
"""

from __future__ import annotations

import argparse
import ast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from labelled_paths import labelled_files


def read_log(path: str) -> list[dict[str, float]]:
    """The Trainer's per-interval metric dicts (lines holding ``acceptance_rate``), as floats."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle.read().replace("\r", "\n").splitlines():
            start = line.find("{'")
            if start < 0 or "'acceptance_rate'" not in line:
                continue
            entry = ast.literal_eval(line[start : line.rindex("}") + 1])
            rows.append({key: float(value) for key, value in entry.items()})
    return rows


def moving_average(values: list[float], window: int) -> list[float]:
    return [sum(values[max(0, i - window + 1) : i + 1]) / (i + 1 - max(0, i - window + 1)) for i in range(len(values))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log", action="append", required=True, help="LABEL=PATH of a trainers/dvi.py log")
    parser.add_argument("--prompts-per-line", type=int, default=10, help="logging_steps x prompts per step")
    parser.add_argument("--window", type=int, default=10, help="log lines in the moving average")
    parser.add_argument("--output", required=True, help="PNG path")
    args = parser.parse_args()
    for flag in ("prompts_per_line", "window"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} {getattr(args, flag)}: give at least 1")
    logs = []
    for label, path in labelled_files(parser, "--log", args.log):  # before plotting: an empty curve was drawn
        logs.append((label, read_log(path)))
        if not logs[-1][1]:
            parser.error(f"--log {label}={path}: no line holds 'acceptance_rate': give the log a trainers/dvi.py run "
                         "printed (its metric dicts)")
    figure, (rate_axis, tau_axis) = plt.subplots(1, 2, figsize=(11, 4))
    for label, rows in logs:
        prompts = [(i + 1) * args.prompts_per_line for i in range(len(rows))]
        rate_axis.plot(prompts, moving_average([r["acceptance_rate"] for r in rows], args.window), label=label)
        tau_axis.plot(prompts, moving_average([r["mean_accepted_tokens"] for r in rows], args.window), label=label)
    rate_axis.set(xlabel="prompts", ylabel="accepted / drafted tokens", title="Draft acceptance over the stream")
    tau_axis.set(xlabel="prompts", ylabel="tokens per target forward (τ)", title="τ over the stream")
    for axis in (rate_axis, tau_axis):
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(args.output, dpi=120)


if __name__ == "__main__":
    main()
