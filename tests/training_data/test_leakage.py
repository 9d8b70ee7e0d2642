import json
from pathlib import Path

import pytest

from hf_adaptive_spec.training_data import leakage
from hf_adaptive_spec.training_data.leakage import (
    PACKAGED_DIGESTS,
    default_eval_data_dir,
    drop_leaked,
    eval_question_digests,
    eval_question_files,
    load_eval_questions,
    question_digest,
    write_eval_question_digests,
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


def test_drop_leaked_matches_every_user_turn_and_paragraph_up_to_form_case_punctuation_and_whitespace(
    data_dir: Path,
) -> None:
    questions = eval_question_digests(data_dir)
    conversations = [
        _conversation("leak_mt", "  Write a poem about\tcats. "),
        _conversation("leak_gsm8k", "What is 2 +\n2?"),
        _conversation("later_turn", "Hello", "Name three colors."),  # a second turn is answered too
        _conversation("punctuation", "Write a poem about cats!"),
        _conversation("case_and_form", "ＷＲＩＴＥ a poem ABOUT cats"),  # full-width letters, upper case, no period
        _conversation("merged_turns", "What is 2 + 2?\n\nthanks"),  # ShareGPT's blank gpt turn dropped, humans joined
        _conversation("pasted", "Please answer this for me.\n\nName three colors."),
        _conversation("pasted_crlf", "Please answer this for me.\r\n\r\nName three colors."),  # found by a review
        _conversation("pasted_spaced", "Please answer this for me.\n \nWhat is 2 + 2?"),
        _conversation("pasted_line", "Please answer this for me:\nWrite a poem about cats."),
        _conversation("fresh", "Write a poem about dogs."),
        _conversation("embedded", "Please answer: Name three colors. Thanks."),  # within a paragraph: not caught
    ]
    assert [c.id for c in drop_leaked(conversations, questions)] == ["fresh", "embedded"]


def test_question_digest_ignores_whitespace_case_punctuation_and_unicode_form() -> None:
    assert question_digest(" What is\t2 +\n2? ") == question_digest("What is 2 + 2?")
    assert question_digest("it\u2019s “fine”") == question_digest("It's \"fine\"")
    assert question_digest("What is 2 + 3?") != question_digest("What is 2 + 2?")
    assert len(question_digest("x")) == 16


def test_digests_written_for_a_folder_are_read_back_from_it(data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "digests.sha256"
    assert write_eval_question_digests(data_dir, path) == 6  # 5 questions, and the two-line one's opening entry
    assert frozenset(path.read_text().split()) == eval_question_digests(data_dir)


def test_without_a_data_folder_the_packaged_digests_filter_the_evaluation_questions(monkeypatch) -> None:
    monkeypatch.setattr(leakage, "default_eval_data_dir", lambda: None)
    digests = eval_question_digests()
    assert digests == frozenset(PACKAGED_DIGESTS.read_text().split())
    conversations = [
        _conversation("spec_bench_qa", "Calculate the atomic mass for lithium."),
        _conversation("fresh", "Calculate the atomic mass for sodium."),
    ]
    assert [c.id for c in drop_leaked(conversations, digests)] == ["fresh"]


@pytest.mark.skipif(default_eval_data_dir() is None, reason="compares the packaged digests with ../shared/data")
def test_packaged_digests_are_those_of_the_shared_question_files() -> None:
    files = eval_question_files()
    assert {path.parent.name for path in files} == {"mt_bench", "spec_bench", "eagle_eval", "gsm8k"}
    assert "Calculate the atomic mass for lithium." in load_eval_questions(files)
    assert frozenset(PACKAGED_DIGESTS.read_text().split()) == eval_question_digests(default_eval_data_dir())


def test_a_folder_missing_some_sets_is_warned_about_by_name(data_dir: Path, caplog) -> None:
    """A folder holding only some of the sets filtered for those alone, without a word."""
    (data_dir / "gsm8k/test.jsonl").unlink()
    (data_dir / "eagle_eval/alpaca.question.jsonl").unlink()
    with caplog.at_level("WARNING", logger="hf_adaptive_spec.training_data.leakage"):
        assert len(eval_question_digests(data_dir)) == 4  # 3 questions, and the two-line one's opening entry
    expected = f"no eagle_eval/*.jsonl or gsm8k/test.jsonl under {data_dir}: those evaluation questions are not kept"
    assert expected in caplog.text
