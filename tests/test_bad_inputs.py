"""A catalogue of bad inputs that used to slip through, each with the error (or the correct
behaviour) it must get now. More live beside their subject: tests/test_errors.py,
tests/test_static_cache.py, tests/bench/test_bench_questions.py and test_bench_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.bench.cli import main as bench_main
from hf_adaptive_spec.hub import MissingArtifactFileError
from tiny_models import prompt, tiny_model


def test_beam_search_is_named_before_the_batch_size(llama):
    with pytest.raises(ValueError, match="beam search"):
        llama.generate(torch.cat([prompt(5), prompt(5, seed=1)]), num_beams=2, max_new_tokens=4,
                       assistant_policy=hfas.StaticTreePolicy.chain(2), assistant_model=hfas.CausalLMDrafter(llama))


@pytest.mark.parametrize(
    "kwargs",
    [dict(prompt_lookup_num_tokens=-1), dict(prompt_lookup_num_tokens=2, max_matching_ngram_size=0),
     dict(prompt_lookup_num_tokens=2, max_matching_ngram_size=-2)],
)
def test_prompt_lookup_knobs_are_validated_as_stock_would(llama, kwargs):
    with pytest.raises(ValueError, match="must be a positive integer"):
        llama.generate(prompt(5), max_new_tokens=4, do_sample=False,
                       assistant_policy=hfas.StaticTreePolicy(depth=0, top_k=1, total_tokens=1), **kwargs)


@pytest.mark.parametrize("name", ["./no/such/folder", "/tmp/hfas-no-such-folder", "a/b/c"])
def test_a_missing_folder_is_named_before_any_hub_id_parsing(name):
    with pytest.raises(MissingArtifactFileError, match=f"No such folder: '{name}'"):
        hfas.AutoDraftPolicy.from_pretrained(name)
    with pytest.raises(MissingArtifactFileError, match=f"No such folder: '{name}'"):
        hfas.Eagle3Drafter.from_pretrained(name, target=tiny_model("llama"))


@pytest.mark.parametrize(
    ("flag", "value"), [("--limit", "-1"), ("--limit", "0"), ("--per-category", "0"), ("--max-new-tokens", "0")]
)
def test_bench_counts_must_be_positive(tmp_path: Path, capsys, flag, value):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question_id": 1, "category": "a", "turns": ["hi"]}) + "\n")
    assert bench_main(["--questions", str(questions), flag, value, "--no-progress"]) == 2
    assert f"{flag} must be at least 1, got {value}" in capsys.readouterr().err


def test_bench_turns_given_as_a_string_are_refused(tmp_path: Path, capsys):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question_id": 1, "category": "a", "turns": "not a list"}) + "\n")
    assert bench_main(["--questions", str(questions), "--no-progress"]) == 2
    assert "q.jsonl:1: 'turns' must be a non-empty list of strings, got a str" in capsys.readouterr().err
