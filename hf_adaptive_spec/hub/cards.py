"""Model cards for published artifacts, rendered from the packaged ``model_cards/<kind>.md`` templates."""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard, ModelCardData
from huggingface_hub.utils import HFValidationError, validate_repo_id

logger = logging.getLogger(__name__)

LIBRARY_NAME = "hf-adaptive-spec"
#: the project's license (pyproject.toml's ``Apache-2.0``) as the Hub's card metadata spells it
LICENSE = "apache-2.0"
CARD_KINDS = ("policy", "eagle3_drafter", "dvi_adapter")
_KIND_METADATA: dict[str, dict[str, str]] = {"dvi_adapter": {"base_model_relation": "adapter"}}
#: a method as a card's title names it (``method_name``; a method not listed is named by its id)
METHOD_NAMES = {
    "ltd": "LTD",
    "radar": "RADAR",
    "resps": "Re-SpS",
    "static": "Static tree",
    "lookup_first": "Lookup-first",
    "confidence_threshold": "Confidence-threshold",
    "heuristic_length": "Heuristic-length",
}
#: a data file's name, never a repository's
_DATA_FILE = re.compile(r"\.(jsonl?|csv|tsv|parquet|arrow|txt)$", re.IGNORECASE)
#: a reST role (``:class:`~pkg.Name```, ``:meth:`x```): Markdown shows its target as code
_REST_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`(~?)([^`]+)`")


def docstring_summary(docstring: str | None) -> str | None:
    """The first paragraph of ``docstring`` on one line, as Markdown (reST's double backquotes and roles as code;
    ``~pkg.Name`` as ``Name``), or None without one: what a card says an artifact does."""
    if not docstring:
        return None
    paragraph = " ".join(inspect.cleandoc(docstring).split("\n\n", 1)[0].split())

    def role(match: re.Match) -> str:
        target = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
        return f"`{target}`"

    return _REST_ROLE.sub(role, paragraph).replace("``", "`") or None


def is_hub_id(name: str) -> bool:
    """Whether ``name`` can be a Hub repository id (huggingface_hub's rule), and is not a data file's name."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return not _DATA_FILE.search(name)


@dataclass(frozen=True)
class CardResult:
    """One measured row of a card's results table.

    Args:
        benchmark: what was decoded, e.g. ``"MT-Bench (80 questions)"``.
        tau: mean tokens per target forward (Spec-Bench's τ: accepted drafts + 1).
        speedup: tokens/s over plain ``generate`` in the same run.
        hardware: where it ran, e.g. ``"1x H100, bf16"``.
    """

    benchmark: str
    tau: float
    speedup: float
    hardware: str = ""


def card_template(kind: str) -> str:
    """Text of the packaged template for ``kind`` (one of :data:`CARD_KINDS`)."""
    if kind not in CARD_KINDS:
        raise ValueError(f"Unknown model card kind {kind!r}; expected one of {', '.join(CARD_KINDS)}.")
    return (resources.files("hf_adaptive_spec") / "model_cards" / f"{kind}.md").read_text(encoding="utf-8")


def results_table(results: Sequence[CardResult]) -> str:
    """Markdown table of ``results``, or a line saying nothing was measured."""
    if not results:
        return "Not measured yet."
    rows = [
        "| Benchmark | Hardware | τ (tokens / target forward) | Speedup vs `generate` |",
        "|---|---|---|---|",
    ]
    rows += [f"| {r.benchmark} | {r.hardware or '-'} | {r.tau:.2f} | {r.speedup:.2f}x |" for r in results]
    return "\n".join(rows)


def render_card(
    kind: str,
    *,
    method: str,
    base_model: str | None = None,
    datasets: Sequence[str] = (),
    pipeline_tag: str | None = "text-generation",
    results: Sequence[CardResult] = (),
    reproduce_command: str | None = None,
    tags: Sequence[str] = (),
    license: str | None = LICENSE,
    **template_vars: Any,
) -> ModelCard:
    """Render the ``kind`` template into a :class:`~huggingface_hub.ModelCard`.

    The YAML header gets ``library_name="hf-adaptive-spec"``, ``license`` (the project's, :data:`LICENSE`, unless
    given), ``base_model`` (the target
    model, when it is a Hub id: :func:`card_target`), ``tags`` (``speculative-decoding``, ``method`` and ``tags``),
    ``datasets`` and ``pipeline_tag``; of ``datasets`` only Hub ids go to the header (the Hub links them and
    reads nothing else there), and every entry, ids and descriptions, to the body's training
    data line. The body gets the results table and the command reproducing the
    checkpoint. Extra ``template_vars`` (``repo_id``, ``drafter``, ``paper_url``,
    ``description``, ``usage`` …) fill the template's optional fields; ``method_name`` (the policy card's title)
    defaults to the method's name in :data:`METHOD_NAMES`.

    Save it with ``card.save(folder / "README.md")`` or upload it with ``card.push_to_hub(repo_id)``.
    """
    base_model, target_model = card_target(base_model)
    card_data = ModelCardData(
        library_name=LIBRARY_NAME,
        base_model=base_model,
        license=license,
        tags=sorted({"speculative-decoding", method, *tags}),
        datasets=[name for name in datasets if is_hub_id(name)] or None,
        pipeline_tag=pipeline_tag,
        **(_KIND_METADATA.get(kind, {}) if base_model else {}),  # a relation needs the model it relates to
    )
    return ModelCard.from_template(
        card_data,
        template_str=card_template(kind),
        method=method,
        results_table=results_table(results),
        reproduce_command=reproduce_command,
        training_data=", ".join(datasets),
        target_model=target_model,
        **{"method_name": METHOD_NAMES.get(method, method), **template_vars},
    )


def card_target(name: str | None) -> tuple[str | None, str | None]:
    """The target as the card's metadata names it (a Hub id, or None) and as its text does. A local folder is no
    Hub id, and the Hub refuses a card whose metadata names one: the text names its path instead. A name that is
    neither (a folder moved since, a relative path from elsewhere) is named in the text only, with a warning:
    a card is written after training, and must not fail then (:func:`check_base_model` refuses a given name early)."""
    if name is None:
        return None, None
    if Path(name).expanduser().exists():
        return None, f"a local checkpoint, `{name}` (not a Hub id, so the metadata names no base model)"
    if not is_hub_id(name):
        logger.warning(
            f"The target {name!r} is neither a Hub model id nor a folder here: the card names it in its text only."
        )
        return None, f"`{name}` (neither a Hub id nor a folder here, so the metadata names no base model)"
    return name, name


def check_base_model(name: str | None) -> None:
    """Refuse a ``base_model`` given to name the target's Hub id that is no Hub id (before training, not after)."""
    if name is not None and not is_hub_id(name):
        raise ValueError(
            f"base_model={name!r} is not a Hub model id ('org/name'): pass the target's Hub id, or leave it unset "
            "(the card then names the target as it was loaded, or a policy's as its recording names it)."
        )
