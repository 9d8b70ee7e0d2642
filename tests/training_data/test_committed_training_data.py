"""The target-answered ShareGPT conversations committed for drafter training hold no evaluation question."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_adaptive_spec.training_data.leakage import eval_question_digests, question_digest

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
COMMITTED = sorted(ARTIFACTS.glob("sharegpt_smollm2_regenerated*.jsonl"))


def _user_turns(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as lines:
        return [
            message["content"]
            for line in lines
            for message in json.loads(line)["conversation"]
            if message["role"] == "user"
        ]


def test_the_committed_files_are_found():
    assert [path.name for path in COMMITTED][:2] == [
        "sharegpt_smollm2_regenerated.jsonl",
        "sharegpt_smollm2_regenerated_extra.jsonl",
    ]


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.name)
def test_no_user_turn_is_an_evaluation_question(path: Path):
    digests = eval_question_digests()
    leaked = [turn[:80] for turn in _user_turns(path) if question_digest(turn) in digests]
    assert not leaked, f"{path.name} holds evaluation questions as user turns: {leaked[:3]}"
