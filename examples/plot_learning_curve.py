"""Plot and tabulate EAGLE-3 held-out learning curves (``heldout_curve.jsonl`` of drafter folders).

    python examples/plot_learning_curve.py --curve "random init=artifacts/eagle3-init-random" \
        --curve "target-layer init=artifacts/eagle3-init-target-layer" \
        --reference 0.396 --output results/eagle3_learning_curve
    python examples/plot_learning_curve.py --from-step 3283 \
        --curve "one layer (stage 13)=results/eagle3_curve/stage13_cpu_heldout_curve.jsonl" \
        --curve "two layers (stage 13, deepened)=results/eagle3_curve/stage13_two_layers_cpu_heldout_curve.jsonl" \
        --reference 0.55 --reference-label "target 0.55" --output results/eagle3_curve/stage13_two_layers_cpu

The training script writes the curve (``--heldout_path``) to its output folder and every saved
drafter folder: first-draft acceptance and greedy chain τ on held-out conversations the target
answered itself, against the non-padding tokens trained on. Writes ``OUTPUT.png`` (both metrics
against tokens) and ``OUTPUT.md`` (one table row per point).

Points saved before 2026-11-27 measured acceptance only where the draft vocabulary holds the
target's token (and their chain τ and accuracy by depth only from such roots); they are drawn as the
in-vocabulary curve, and the every-token acceptance (a token the drafter cannot say is a miss, as
when drafting) is drawn where the point has it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from labelled_paths import labelled_paths

from hf_adaptive_spec.training.eagle3 import HeldOutPoint, read_curve


def chain_depths(points: list[HeldOutPoint]) -> str:
    """The chain depths ``points`` measured τ at, e.g. ``"3"`` or ``"3, 4"``."""
    return ", ".join(map(str, sorted({len(p.step_accuracy) for p in points})))


def plot(curves: dict[str, list[HeldOutPoint]], reference: float | None, path: str, reference_label: str) -> None:
    figure, (acceptance, tau) = plt.subplots(1, 2, figsize=(11, 4))
    depths = chain_depths([p for points in curves.values() for p in points])
    several = "," in depths  # curves of several chain depths: each says its own
    for label, points in curves.items():
        tokens = [p.input_tokens_seen / 1e6 for p in points]
        acceptance.plot(
            tokens, [p.in_vocabulary_acceptance for p in points], marker="o",
            label=f"{label}, tokens in the draft vocabulary",
        )
        counted = [
            (t, p.first_draft_acceptance) for t, p in zip(tokens, points) if p.first_draft_acceptance is not None
        ]
        if counted:
            acceptance.plot(*zip(*counted), marker="s", linestyle="--", label=f"{label}, every token")
        at_depth = f", depth {chain_depths(points)}" if several else ""
        tau.plot(tokens, [p.chain_tau for p in points], marker="o", label=f"{label}, every position{at_depth}")
        walked = [(t, p.decoding_tau) for t, p in zip(tokens, points) if p.decoding_tau is not None]
        if walked:
            tau.plot(*zip(*walked), marker="s", linestyle="--", label=f"{label}, walked as decoding walks{at_depth}")
    if reference is not None:
        acceptance.axhline(reference, color="grey", linestyle="--", label=reference_label)
    acceptance.set(xlabel="tokens trained (millions)", ylabel="held-out first-draft acceptance")
    depths = f"depths {depths}, each curve's in its legend" if several else f"depth {depths}"
    tau.set(xlabel="tokens trained (millions)", ylabel=f"held-out greedy chain τ ({depths})")
    for axis in (acceptance, tau):
        axis.grid(alpha=0.3)
        # below the axes: inside, "best" can sit over the reference line the curves are read against
        axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")


def table(curves: dict[str, list[HeldOutPoint]]) -> str:
    lines = [
        "| run | step | tokens trained | first-draft acceptance, every token | in the draft vocabulary "
        "| accuracy by depth | chain τ | decoding τ | copyable tokens: share, accuracy by depth | target dtype "
        "| held-out set |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, points in curves.items():
        for p in points:
            depths = " / ".join(f"{a:.3f}" for a in p.step_accuracy)
            every = "–" if p.first_draft_acceptance is None else f"{p.first_draft_acceptance:.3f}"
            walked = "–" if p.decoding_tau is None else f"{p.decoding_tau:.3f}"
            copying = "–" if p.copy_share is None else (
                f"{p.copy_share:.3f}: " + " / ".join(f"{a:.3f}" for a in p.copy_step_accuracy)
            )
            lines.append(f"| {label} | {p.step} | {p.input_tokens_seen:,} | {every} | {p.in_vocabulary_acceptance:.3f} "
                         f"| {depths} | {p.chain_tau:.3f} | {walked} | {copying} | {p.measured_in} "
                         f"| {p.heldout_set or 'before 2026-12-05'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--curve", action="append", required=True,
        help="LABEL=FOLDER holding heldout_curve.jsonl, or LABEL=a curve file",
    )
    parser.add_argument("--reference", type=float, default=None, help="a first-draft acceptance to draw as a line")
    parser.add_argument("--reference-label", default="shipped drafter", help="the line's legend (e.g. 'target 0.55')")
    parser.add_argument(
        "--from-step", type=int, default=0,
        help="draw only points at or after this lineage step (a stage's curve file holds its whole lineage from "
        "step 0)",
    )
    parser.add_argument(
        "--output", required=True, help="path without extension: writes OUTPUT.png and OUTPUT.md (folders created)"
    )
    args = parser.parse_args(argv)
    curves = {}
    for label, folder in labelled_paths(parser, "--curve", args.curve, "FOLDER (or LABEL=a curve file)"):
        if label in curves:  # a dict: the later curve replaced the earlier one, unsaid
            parser.error(f"--curve names {label!r} twice: give each curve a label of its own")
        points = [p for p in read_curve(folder) if p.step >= args.from_step]
        if not points:
            parser.error(f"{folder} holds no heldout_curve.jsonl point at or after step {args.from_step} "
                         "(train with --heldout_path).")
        curves[label] = points
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    plot(curves, args.reference, args.output + ".png", args.reference_label)
    with open(args.output + ".md", "w", encoding="utf-8") as handle:
        handle.write(table(curves))
    print(table(curves))


if __name__ == "__main__":
    main()
