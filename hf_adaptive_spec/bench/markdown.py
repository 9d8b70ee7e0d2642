"""Markdown tables of a report: one row per method, then speedup by category."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.files import write_text_atomically
from .records import FP32_REFERENCE_METHOD, POLICY_FIT_REPORTS
from .report import NOT_INTERLEAVED

TIME_PARTS = ("draft", "verify", "policy", "other")


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown (settings line, summary table, per-category speedup table)."""
    settings, summary = report["settings"], report["summary"]
    lines = [
        "## Speculative decoding benchmark",
        "",
        f"Model `{settings['model']}` ({settings['dtype']}) on {_processor(report['environment'])}, "
        f"{settings['options']['max_new_tokens']} new tokens max, {_decoding(settings['options'])}, batch size 1.",
        *(["", f"**Partial report** of an interrupted run: {settings['partial']} (without the warm-up's compile "
               "seconds, which its progress file does not keep)."] if settings.get("partial") else []),
        *(["", f"Report rebuilt from the finished run's `{settings['rebuilt_from']}` (without the warm-up's compile "
               "seconds, which it does not keep)."] if settings.get("rebuilt_from") else []),
        "",
        "| Method | Questions | Tokens | Time (s) | Tokens/s | Speedup | Median speedup | vs stock | τ | Depth "
        "| Verified | Identical | fp32 agreement | Compile (s) | "
        + " | ".join(part.capitalize() for part in TIME_PARTS)
        + " |",
        "|---" * (14 + len(TIME_PARTS)) + "|",
    ]
    for method, figures in summary.items():
        cells = [
            method,
            str(figures["questions"]),
            str(figures["new_tokens"]),
            f"{figures['wall_time']:.2f}",
            f"{figures['throughput']:.1f}",
            _ratio(figures["speedup"]),
            _ratio(figures["median_speedup"]),
            _ratio(figures.get("speedup_vs_stock")),
            _tau(figures),
            _mean(figures.get("mean_draft_depth")),
            _mean(figures.get("mean_verified_tokens")),
            _identity(figures),
            _agreement(figures),
            _mean(figures.get("compile_seconds")),
            *_time_shares(figures),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Speedup: tokens/s over `{settings.get('reference', 'stock')}`'s in the same run; vs stock: over `stock`'s. "
        "τ: tokens per target forward († counted from target forward passes, prefill included). Depth: mean levels the "
        "drafter drafted per cycle (a prompt-lookup chain not counted); Verified: mean size of the verified tree per "
        "cycle (root and lookup chain included). fp32 agreement (greedy below float32, unless --no_fp32_agreement): "
        "mean share of the float32 stock answer produced before the first divergence, and the share of turns identical "
        "to it. Compile: seconds compiling graphs (compiled methods; – when a single warm-up call leaves it "
        "unmeasured), outside the timed turns. Time columns: share of wall time."
        + (f" `{FP32_REFERENCE_METHOD}`: those float32 stock answers, eager, each timed right after `stock`'s turn "
           "(the peer eager float32 stock)." if FP32_REFERENCE_METHOD in summary else ""),
        *_policy_fit_notes(summary),
        *_capped_trees_note(summary),
        *_restarted_learning_note(settings),
        *_not_interleaved_note(report.get(NOT_INTERLEAVED) or {}, settings),
        "",
        *_category_table(summary),
    ]
    return "\n".join(lines) + "\n"


#: (summary field, what the note says) for each way a method's policy may not fit its run
def _policy_fit_notes(summary: dict[str, Any]) -> list[str]:
    """One line per method and way its policy does not fit this run: trained on another cost curve, with
    another drafter or with another prompt-lookup branch."""
    lines = [f"**`{method}`: {what}.** {figures[field]}"
             for method, figures in summary.items() for field, what in POLICY_FIT_REPORTS.items() if figures.get(field)]
    return [""] + lines if lines else []


def _capped_trees_note(summary: dict[str, Any]) -> list[str]:
    """The methods whose trees the static path lowered to fit its largest verification bucket: they ran smaller
    trees than their names say."""
    capped = ", ".join(f"`{method}` in {figures['capped_trees']} cycles" for method, figures in summary.items()
                       if figures.get("capped_trees"))
    return (
        ["", f"**Trees capped to the largest verification bucket** (smaller than the method asked for): {capped}; "
         "pass --verify_buckets with a larger bucket, or give the method a smaller tree."]
        if capped
        else []
    )


def _restarted_learning_note(settings: dict[str, Any]) -> list[str]:
    """The methods a resumed run restarted learning in (an uninterrupted run carries it from call to call), with the
    questions each had finished at every restart."""
    restarted = settings.get("restarted_learning") or {}
    listed = ", ".join(
        f"`{method}` after {' and '.join(map(str, finished))} questions" for method, finished in restarted.items()
    )
    return (
        ["", f"**Resumed run:** what these methods learn across calls started afresh when the run resumed: {listed}."]
        if listed
        else []
    )


def _not_interleaved_note(apart: dict[str, int], settings: dict[str, Any]) -> list[str]:
    """The methods measured on some questions in another session of a resumed run than the reference."""
    listed = ", ".join(f"`{method}` on {count}" for method, count in apart.items())
    return (
        ["", f"**Not interleaved:** a resumed run measured these methods in another session than "
             f"`{settings.get('reference', 'stock')}` on some questions: {listed}; their speedup there compares two "
             f"sessions of the machine (sessions began {', '.join(settings.get('sessions') or [])} UTC). To compare "
             "them turn by turn, run them together without --resume."]
        if listed
        else []
    )


def write_markdown(report: dict[str, Any], path: Path) -> None:
    """Write :func:`render_markdown` to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, render_markdown(report))


def _category_table(summary: dict[str, Any]) -> list[str]:
    methods = list(summary)
    categories = list(dict.fromkeys(name for figures in summary.values() for name in figures["categories"]))
    lines = [
        "### Speedup by category",
        "",
        "| Category | " + " | ".join(methods) + " |",
        "|---" * (1 + len(methods)) + "|",
    ]
    for name in categories:
        cells = [_ratio(summary[method]["categories"].get(name, {}).get("speedup")) for method in methods]
        lines.append(f"| {name or '(none)'} | " + " | ".join(cells) + " |")
    return lines


def _decoding(options: dict[str, Any]) -> str:
    temperature = options.get("temperature", 0.0)
    return "greedy" if not temperature else f"sampling at temperature {temperature:g} (identity not checked)"


def _identity(figures: dict[str, Any]) -> str:
    if figures["identical"] is None:
        return "–"
    return "yes" if figures["identical"] else f"**no** ({figures['mismatched_turns']} turns)"


def _agreement(figures: dict[str, Any]) -> str:
    agreement = figures.get("fp32_agreement")
    if agreement is None:
        return "–"
    return f"{agreement:.2f} ({100 * figures['fp32_identical_share']:.0f}% identical)"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _mean(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _tau(figures: dict[str, Any]) -> str:
    value = figures["mean_accepted_tokens"]
    if value is None:
        return "–"
    return f"{value:.2f}" + ("†" if figures["mean_accepted_tokens_source"] == "target_passes" else "")


def _time_shares(figures: dict[str, Any]) -> list[str]:
    split, total = figures["time_split"], figures["wall_time"]
    if split is None or total <= 0:
        return ["–"] * len(TIME_PARTS)
    return [f"{100 * split[part] / total:.0f}%" for part in TIME_PARTS]


def _processor(environment: dict) -> str:
    """The device, with a CPU's matrix instruction set where the report recorded it."""
    instruction_set = environment.get("instruction_set")
    return f"{environment['device']} ({instruction_set})" if instruction_set else environment["device"]
