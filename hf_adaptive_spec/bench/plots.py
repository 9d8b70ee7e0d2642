"""PNG plots of a report, drawn with matplotlib's Agg canvas (no display, no pyplot state)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .markdown import TIME_PARTS
from .methods import REFERENCE_METHOD


def write_plots(report: dict[str, Any], folder: Path) -> list[Path]:
    """Write the four plots into ``folder``; return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = report["summary"]
    drawers = {
        "speedup_by_category.png": _speedup_by_category,
        "mean_accepted_tokens.png": _mean_accepted_tokens,
        "time_split.png": _time_split,
        "accepted_length_histogram.png": _accepted_length_histogram,
    }
    paths = []
    for filename, draw in drawers.items():
        figure = Figure(figsize=(8, 4.5), layout="constrained")
        draw(figure.add_subplot(), summary)
        paths.append(folder / filename)
        figure.savefig(paths[-1], dpi=120)
    return paths


def _grouped_bars(axes: Axes, groups: list[str], series: dict[str, list[float]]) -> None:
    """One cluster of bars per group, one bar per series."""
    width = 0.8 / max(len(series), 1)
    positions = np.arange(len(groups))
    for index, (label, values) in enumerate(series.items()):
        axes.bar(positions + (index - (len(series) - 1) / 2) * width, values, width, label=label)
    axes.set_xticks(positions, groups, rotation=30, ha="right")
    if series:
        axes.legend(fontsize="small")


def speedup_series(summary: dict[str, Any]) -> tuple[str, list[str], dict[str, list[float]]]:
    """``(reference, groups, speedups per method)`` of the speedup plot: one value per category and overall, NaN
    where the speedup is unknown (no question of the category shared with the reference), which draws no bar; a 0
    drew a bar that read as a method that generated nothing."""
    reference = next((figures.get("reference") for figures in summary.values()), None) or REFERENCE_METHOD
    categories = list(dict.fromkeys(name for figures in summary.values() for name in figures["categories"]))
    series = {
        method: [_known(summary[method]["categories"].get(name, {}).get("speedup")) for name in categories]
        + [_known(summary[method]["speedup"])]
        for method in summary if method != reference
    }
    return reference, [*categories, "overall"], series


def _known(speedup: float | None) -> float:
    return math.nan if speedup is None else speedup


def _speedup_by_category(axes: Axes, summary: dict[str, Any]) -> None:
    reference, groups, series = speedup_series(summary)
    _grouped_bars(axes, [name or "(none)" for name in groups], series)
    axes.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    axes.set_ylabel(f"speedup over {reference}")
    unknown = any(math.isnan(value) for values in series.values() for value in values)
    axes.set_title("Speedup per category" + (" (no bar: not measured against the reference)" if unknown else ""))


def _mean_accepted_tokens(axes: Axes, summary: dict[str, Any]) -> None:
    methods = list(summary)
    values = [summary[method]["mean_accepted_tokens"] or 0.0 for method in methods]
    bars = axes.bar(methods, values, color="tab:green")
    axes.bar_label(bars, [f"{v:.2f}" if v else "n/a" for v in values])
    axes.set_ylabel("τ (tokens per target forward)")
    axes.set_title("Mean accepted tokens")


def _time_split(axes: Axes, summary: dict[str, Any]) -> None:
    """Milliseconds per generated token, stacked; methods without a split show one 'unsplit' bar."""
    methods = list(summary)
    bottoms = np.zeros(len(methods))
    for part in (*TIME_PARTS, "unsplit"):
        heights = np.array([_ms_per_token(summary[method], part) for method in methods])
        axes.bar(methods, heights, bottom=bottoms, label=part)
        bottoms += heights
    axes.set_ylabel("ms per generated token")
    axes.set_title("Time split")
    axes.legend(fontsize="small")


def _ms_per_token(figures: dict[str, Any], part: str) -> float:
    split, tokens = figures["time_split"], max(figures["new_tokens"], 1)
    if split is None:
        seconds = figures["wall_time"] if part == "unsplit" else 0.0
    else:
        seconds = split.get(part, 0.0)
    return 1000.0 * seconds / tokens


def _accepted_length_histogram(axes: Axes, summary: dict[str, Any]) -> None:
    histograms = {m: f["accepted_length_histogram"] for m, f in summary.items() if f["accepted_length_histogram"]}
    if not histograms:
        axes.text(0.5, 0.5, "no method reported accepted lengths", ha="center", va="center")
        axes.set_axis_off()
        return
    longest = max(len(counts) for counts in histograms.values())
    series = {
        method: [count / sum(counts) for count in counts] + [0.0] * (longest - len(counts))
        for method, counts in histograms.items()
    }
    _grouped_bars(axes, [str(length) for length in range(longest)], series)
    axes.set_xlabel("accepted draft tokens per cycle")
    axes.set_ylabel("fraction of cycles")
    axes.set_title("Accepted-length histogram")
