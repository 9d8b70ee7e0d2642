import json
from pathlib import Path

import pytest

from hf_adaptive_spec.training_data.leakage import (
    default_eval_data_dir,
    drop_leaked,
    eval_question_files,
    load_eval_questions,
)
from hf_adaptive_spec.training_data.sharegpt import Conversation


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    _write_jsonl(tmp_path / "mt_bench/question.jsonl", [{"turns": ["Write a  poem\nabout cats.", "Now in French."]}])
    _write_jsonl(tmp_path / "spec_bench/question.jsonl", [{"turns": ["Translate German to English: Hallo"]}])
    _write_jsonl(tmp_path / "eagle_eval/alpaca.question.jsonl", [{"turns": ["Name three colors."]}])
    _write_jsonl(tmp_path / "gsm8k/test.jsonl", [{"question": "What is 2 + 2?", "answer": "#### 4"}])
    (tmp_path / "eagle_eval/LICENSE.eagle").write_text("not a question file")
    (tmp_path / "spec_bench/leaderboard.csv").write_text("device,method\n")
    return tmp_path


def _conversation(id_: str, *user_turns: str) -> Conversation:
    messages = []
    for turn in user_turns:
        messages += [{"role": "user", "content": turn}, {"role": "assistant", "content": "ok"}]
    return Conversation(id=id_, messages=messages)


def test_eval_question_files_finds_the_four_sets_only(data_dir: Path) -> None:
    names = [path.relative_to(data_dir).as_posix() for path in eval_question_files(data_dir)]
    assert names == [
        "eagle_eval/alpaca.question.jsonl",
        "gsm8k/test.jsonl",
        "mt_bench/question.jsonl",
        "spec_bench/question.jsonl",
    ]


def test_eval_question_files_fails_loudly_on_an_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        eval_question_files(tmp_path)


def test_load_eval_questions_reads_every_turn_and_gsm8k_questions_normalised(data_dir: Path) -> None:
    assert load_eval_questions(eval_question_files(data_dir)) == {
        "Write a poem about cats.",
        "Now in French.",
        "Translate German to English: Hallo",
        "Name three colors.",
        "What is 2 + 2?",
    }


def test_drop_leaked_matches_the_first_user_turn_up_to_whitespace(data_dir: Path) -> None:
    questions = load_eval_questions(eval_question_files(data_dir))
    conversations = [
        _conversation("leak_mt", "  Write a poem about\tcats. "),
        _conversation("leak_gsm8k", "What is 2 +\n2?"),
        _conversation("later_turn", "Hello", "Name three colors."),
        _conversation("near_miss", "Write a poem about cats!"),
    ]
    assert [c.id for c in drop_leaked(conversations, questions)] == ["later_turn", "near_miss"]


def test_default_eval_data_dir_holds_the_shared_question_files() -> None:
    assert default_eval_data_dir() is not None, "the shared data folder (../shared/data) must sit next to the checkout"
    files = eval_question_files()
    assert {path.parent.name for path in files} == {"mt_bench", "spec_bench", "eagle_eval", "gsm8k"}
    assert "Calculate the atomic mass for lithium." in load_eval_questions(files)
