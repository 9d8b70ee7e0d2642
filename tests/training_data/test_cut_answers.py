"""Marking the answers max_new_tokens cut in files regenerated before regeneration marked them."""

from __future__ import annotations

import json

import pytest
from tiny_models import make_char_tokenizer

from hf_adaptive_spec.training_data.cut_answers import is_cut, mark_cut_answers


def _write(path, answers):
    records = [{"id": f"r{i}", "conversation": [{"role": "user", "content": "q"}, *answer]}
               for i, answer in enumerate(answers)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def _assistant(text, **extra):
    return [{"role": "assistant", "content": text, **extra}]


def test_answers_reaching_the_cap_within_the_margin_are_marked_and_others_kept(tmp_path):
    tokenizer = make_char_tokenizer()  # one token a character here
    path = tmp_path / "data.jsonl"
    _write(path, [_assistant("a" * 10), _assistant("b" * 7), _assistant("c" * 6), _assistant("é" * 3, truncated=True),
                  [*_assistant("d" * 10), {"role": "user", "content": "more"}, *_assistant("e")]])
    found = mark_cut_answers(path, tokenizer, max_new_tokens=10, margin=3)
    assert (found.answers, found.marked, found.already_marked) == (6, 3, 1)
    marked = [[m.get("truncated", False) for m in json.loads(line)["conversation"] if m["role"] == "assistant"]
              for line in path.read_text(encoding="utf-8").splitlines()]
    assert marked == [[True], [True], [False], [True], [True, False]]
    assert "é" in path.read_text(encoding="utf-8")  # written as regeneration writes it (ensure_ascii=False)
    assert is_cut("x" * 7, tokenizer, 10, margin=3) and not is_cut("x" * 6, tokenizer, 10, margin=3)


def test_a_file_without_cut_answers_is_left_byte_for_byte(tmp_path):
    path = tmp_path / "data.jsonl"
    _write(path, [_assistant("short"), _assistant("ü\u2028line\x85next")])  # separators splitlines would break at
    before = path.read_bytes()
    assert mark_cut_answers(path, make_char_tokenizer(), max_new_tokens=64).marked == 0
    assert path.read_bytes() == before


def test_a_cap_within_the_margin_is_refused(tmp_path):
    with pytest.raises(ValueError, match="max_new_tokens=3 must exceed the margin"):
        mark_cut_answers(tmp_path / "unused.jsonl", make_char_tokenizer(), max_new_tokens=3)


def test_answers_with_token_ids_keep_them_and_the_target_s_own_verdict(tmp_path):
    """Regeneration that kept the ids marked its cut answers itself: the length rule leaves such answers alone."""
    tokenizer = make_char_tokenizer()
    path = tmp_path / "data.jsonl"
    ids = tokenizer.encode("a" * 10)
    _write(path, [_assistant("a" * 10, token_ids=ids), _assistant("a" * 10, token_ids=ids, truncated=True),
                  _assistant("b" * 10)])
    found = mark_cut_answers(path, tokenizer, max_new_tokens=10, margin=3)
    assert (found.answers, found.marked, found.already_marked) == (3, 1, 1)
    answers = [json.loads(line)["conversation"][1] for line in path.read_text(encoding="utf-8").splitlines()]
    assert answers[0] == {"role": "assistant", "content": "a" * 10, "token_ids": ids}
    assert answers[1] == {"role": "assistant", "content": "a" * 10, "token_ids": ids, "truncated": True}
    assert answers[2]["truncated"] is True


def test_a_file_a_regeneration_is_writing_is_refused_and_a_missing_one_named(tmp_path):
    """Marking replaces the file in one rename: a regeneration appending to it meanwhile went on writing into the
    file the rename replaced, and its records after the marking's read were lost. The file's writer lock refuses it
    (as it refuses a second regeneration); a missing file is named, not made empty by the lock."""
    from hf_adaptive_spec.training_data.jsonl_output import writing_alone

    path = tmp_path / "data.jsonl"
    _write(path, [_assistant("a" * 10)])
    before = path.read_bytes()
    busy = "being written by another process.*another marking.*Wait for it to end, then mark"
    with writing_alone(path), pytest.raises(RuntimeError, match=busy):
        mark_cut_answers(path, make_char_tokenizer(), max_new_tokens=10, margin=3)
    assert path.read_bytes() == before
    with pytest.raises(FileNotFoundError, match="missing.jsonl: no such file"):
        mark_cut_answers(tmp_path / "missing.jsonl", make_char_tokenizer(), max_new_tokens=10, margin=3)
    assert not (tmp_path / "missing.jsonl").exists()
