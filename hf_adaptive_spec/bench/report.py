"""The report: settings, environment, ``summary`` by method (with a per-category breakdown), records.

Markdown and plots are drawn from this dict, so they can be redrawn from a saved JSON report.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers.utils import is_sklearn_available

from ..core.cost_curve import cpu_instruction_set
from ..core.files import write_text_atomically
from .errors import BenchError
from .methods import REFERENCE_METHOD
from .records import QuestionRecord, fp32_reference_records
from .summary import summarize


def build_report(
    records: list[QuestionRecord],
    settings: dict[str, Any],
    device: torch.device,
    reference: str = "stock",
    warmup_seconds: dict[str, list[list[float]]] | None = None,
) -> dict[str, Any]:
    """Report dict: ``summary[method]`` holds the figures over all questions plus ``categories[category]``;
    speedups are relative to ``reference`` (and to ``stock`` in ``speedup_vs_stock``). Below float32 the float32
    answers timed beside ``stock`` are summarised as ``stock-fp32`` (:func:`~.records.fp32_reference_records`)."""
    measured = records + fp32_reference_records(records, REFERENCE_METHOD)
    categories = list(dict.fromkeys(record.category for record in measured))
    by_category = {name: summarize([r for r in measured if r.category == name], reference) for name in categories}
    summary = {}
    for method, figures in summarize(measured, reference, warmup_seconds).items():
        summary[method] = asdict(figures)
        summary[method]["categories"] = {
            name: asdict(by_category[name][method]) for name in categories if method in by_category[name]
        }
    apart = not_interleaved(records, reference)
    return {
        "settings": settings,
        "environment": environment(device),
        "summary": summary,
        **({NOT_INTERLEAVED: apart} if apart else {}),
        "records": [record.to_dict() for record in records],
    }


#: the report's key of :func:`not_interleaved`'s counts, present when some method has any
NOT_INTERLEAVED = "not_interleaved"


def not_interleaved(records: list[QuestionRecord], reference: str) -> dict[str, int]:
    """Each method with the questions a session of a resumed run measured it in other than ``reference``'s: on those
    its speedup compares two sessions of the machine, not turns interleaved in one (a method added when resuming is
    measured after every reference turn). A record of no session (written before sessions were numbered) is of
    another session than a numbered one, which came later; two such records are not known apart."""
    reference_session = {record.question_id: record.session for record in records if record.method == reference}
    apart: dict[str, int] = {}
    for record in records:
        if record.method == reference or record.question_id not in reference_session:
            continue
        if record.session != reference_session[record.question_id]:
            apart[record.method] = apart.get(record.method, 0) + 1
    return apart


def measured_on(device: torch.device) -> dict[str, str]:
    """The processor (on a CPU with its matrix instruction set, which decides what a tree costs in bfloat16) and
    the libraries the timings depend on (a resumed run must match them)."""
    if device.type == "cuda":
        processor = {"device": torch.cuda.get_device_name(device)}
    else:
        processor = {"device": _cpu_name(), "instruction_set": cpu_instruction_set()}
    return {**processor, "torch": torch.__version__, "transformers": transformers.__version__}


def environment(device: torch.device) -> dict[str, Any]:
    """Where the numbers were measured, and whether scikit-learn was importable: transformers adapts its assistant's
    confidence threshold (``hf-assistant``) only then, while the package's heuristics adapt theirs either way."""
    return {
        **measured_on(device),
        "scikit_learn": is_sklearn_available(),
        "python": platform.python_version(),
        "num_threads": torch.get_num_threads(),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def read_report(path: str | Path) -> dict[str, Any]:
    """The report ``hf-adaptive-spec bench --json`` wrote at ``path``; another file (a profile, a progress file, JSON
    cut short) is refused naming it, where its readers failed in a KeyError or a JSONDecodeError."""
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        report = error
    if not (isinstance(report, dict) and isinstance(report.get("records"), list)
            and isinstance(report.get("settings"), dict)):
        found = f"not JSON: {report}" if isinstance(report, json.JSONDecodeError) else "no 'settings' and 'records'"
        raise BenchError(f"{path} is not a bench report ({found}): give the file `hf-adaptive-spec bench --json` "
                         "wrote (where a progress file is read, its .progress.jsonl)")
    return report


def is_bench_report(path: Path) -> bool:
    """Whether the file at ``path`` is a report of ``hf-adaptive-spec bench`` (:func:`read_report` reads it)."""
    try:
        read_report(path)
    except (BenchError, OSError, ValueError):  # another kind of file (a profile), unreadable, or not text
        return False
    return True


def write_json(report: dict[str, Any], path: Path) -> None:
    """Write the report, creating parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(report, indent=2) + "\n")  # a crash leaves the report before, not half
