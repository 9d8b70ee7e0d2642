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


#: the max_new_tokens each committed file was regenerated with (artifacts/README.md)
CAPS = {"sharegpt_smollm2_translation.jsonl": 128, "sharegpt_smollm2_summarization.jsonl": 192}
TRACKED = [path for path in COMMITTED if "_train" not in path.name and not path.name.startswith(
    ("sharegpt_smollm2_target", "sharegpt_smollm2_tasks", "sharegpt_smollm2_mixed"))]  # not the derived files


@pytest.mark.slow
@pytest.mark.parametrize("path", TRACKED, ids=lambda path: path.name)
def test_every_answer_the_cap_cut_is_marked_truncated(path: Path):
    """Training must not teach a cut answer an end (trainers/mark_truncated.py marked the files made before
    regeneration did); the rule is hf_adaptive_spec.training_data.cut_answers.is_cut."""
    from hf_adaptive_spec.default_model import load_model
    from hf_adaptive_spec.training_data.cut_answers import is_cut

    _, tokenizer = load_model("default")
    cap = CAPS.get(path.name, 256)
    unmarked = [record.id for record in read_conversation_records(path) for message in record.messages
                if message["role"] == "assistant" and not message.get("truncated")
                and is_cut(message["content"], tokenizer, cap)]
    assert not unmarked, f"{path.name}: {len(unmarked)} answers at the {cap}-token cap are not marked: {unmarked[:3]}"
