"""Model cards: YAML metadata, results table and reproduce command, for every artifact kind."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from hf_adaptive_spec.hub import CARD_KINDS, CardResult, render_card

from .artifacts import TinyThresholdPolicy

RESULTS = [
    CardResult("MT-Bench", tau=3.456, speedup=2.5, hardware="1x H100, bf16"),
    CardResult("GSM8K", tau=4.0, speedup=3.125),
]
COMMAND = "hf-adaptive-spec train ltd --target org/target --max-steps 500"


@pytest.mark.parametrize("kind", CARD_KINDS)
def test_card_has_metadata_results_and_command(kind: str):
    rendered = render_card(
        kind,
        method="ltd",
        base_model="org/target",
        datasets=["org/sharegpt"],
        results=RESULTS,
        reproduce_command=COMMAND,
        repo_id="org/artifact",
    )
    card = ModelCard(str(rendered))  # parse back, as the Hub would
    assert card.data.library_name == "hf-adaptive-spec"
    assert card.data.base_model == "org/target"
    assert card.data.tags == ["ltd", "speculative-decoding"]
    assert card.data.datasets == ["org/sharegpt"]
    assert card.data.pipeline_tag == "text-generation"
    assert "| MT-Bench | 1x H100, bf16 | 3.46 | 2.50x |" in card.text
    assert "| GSM8K | - | 4.00 | 3.12x |" in card.text
    assert f"```bash\n{COMMAND}\n```" in card.text
    assert "org/artifact" in card.text


def test_adapter_card_declares_the_adapter_relation():
    card = ModelCard(str(render_card("dvi_adapter", method="dvi", base_model="org/target")))
    assert card.data.base_model_relation == "adapter"


def test_card_without_measurements_says_so():
    text = render_card("policy", method="static").text
    assert "Not measured yet." in text
    assert "No command recorded." in text


def test_unknown_card_kind_is_refused():
    with pytest.raises(ValueError, match="Unknown model card kind 'drafter'"):
        render_card("drafter", method="x")


def test_save_pretrained_writes_the_rendered_card(tmp_path: Path):
    TinyThresholdPolicy().save_pretrained(
        tmp_path, model_card_kwargs={"base_model": "org/target", "results": RESULTS, "reproduce_command": COMMAND}
    )
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.library_name == "hf-adaptive-spec"
    assert card.data.tags == ["speculative-decoding", "threshold"]
    assert "| MT-Bench | 1x H100, bf16 | 3.46 | 2.50x |" in card.text
    assert COMMAND in card.text


def test_a_local_folder_is_never_named_as_the_base_model(tmp_path: Path):
    """The Hub refuses a card whose base_model is not a model id, and an adapter relation needs its base model."""
    card = render_card("dvi_adapter", method="dvi", base_model=str(tmp_path))
    assert card.data.base_model is None and getattr(card.data, "base_model_relation", None) is None
    assert render_card("dvi_adapter", method="dvi", base_model="org/target").data.base_model == "org/target"
