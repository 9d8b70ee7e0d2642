"""The target-answered ShareGPT conversations committed for drafter training hold no evaluation question."""

from __future__ import annotations

from pathlib import Path

import pytest

from hf_adaptive_spec.training_data.jsonl_output import read_conversation_records
from hf_adaptive_spec.training_data.leakage import eval_question_digests, leaks

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
COMMITTED = sorted(ARTIFACTS.glob("sharegpt_smollm2_regenerated*.jsonl")) + sorted(
    path for path in ARTIFACTS.glob("sharegpt_smollm2_*.jsonl") if "regenerated" not in path.name
)
HELD_OUT = 100  # the last conversations of sharegpt_smollm2_regenerated.jsonl: the drafter's held-out set


@pytest.fixture(scope="module")
def digests() -> frozenset[str]:
    return eval_question_digests()


def test_the_committed_files_are_found():
    assert [path.name for path in COMMITTED][:2] == [
        "sharegpt_smollm2_regenerated.jsonl",
        "sharegpt_smollm2_regenerated_extra.jsonl",
    ]


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.name)
def test_no_user_turn_is_an_evaluation_question(path: Path, digests: frozenset[str]):
    """Every user turn and every paragraph of one, as the leakage filter compares them."""
    leaked = [conversation.id for conversation in read_conversation_records(path) if leaks(conversation, digests)]
    assert not leaked, f"{path.name} holds evaluation questions as user turns: {leaked[:3]}"


def test_no_other_file_holds_a_held_out_conversation():
    held_out = {record.id for record in list(read_conversation_records(COMMITTED[0]))[-HELD_OUT:]}
    assert len(held_out) == HELD_OUT
    for path in COMMITTED[1:]:
        leaked = held_out & {record.id for record in read_conversation_records(path)}
        assert not leaked, f"{path.name} holds held-out conversations: {sorted(leaked)[:3]}"
