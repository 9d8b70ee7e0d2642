"""``examples/near_duplicate_audit.py`` finds an evaluation question pasted inside a longer turn or lightly reworded,
which the leakage filter's exact match misses, and not a turn that only shares a template with it."""

from __future__ import annotations

import json

import pytest
from example_scripts import load_example

from hf_adaptive_spec.training_data.leakage import question_digest

QUESTION = "Compose an engaging travel blog post about a recent trip to Hawaii, highlighting cultural experiences."


def test_embedded_and_reworded_questions_are_found_and_a_shared_template_is_not():
    index = load_example("near_duplicate_audit").QuestionIndex(
        [QUESTION, "Translate German to English: Es gibt nicht viel auszusetzen."], n=4
    )
    embedded = f"Hi! I need help with my homework. {QUESTION.upper()} Please keep it under 300 words, thanks."
    reworded = "Compose an engaging travel blog post about a recent trip to Japan, highlighting cultural experiences!"
    template = "Translate German to English: Das Wetter ist heute schön und wir gehen spazieren."
    assert question_digest(embedded) != question_digest(QUESTION) != question_digest(reworded)  # the filter misses them
    assert [index for _, index in index.contained(embedded, 0.5)] == [0]
    # 8 of its 12 4-grams: the 4 with "Hawaii" differ
    assert [round(share, 2) for share, _ in index.contained(reworded, 0.5)] == [0.67]
    assert index.contained(template, 0.5) == []


def test_the_summary_counts_turns_holding_a_question_not_pairs(tmp_path, monkeypatch, capsys):
    """A turn holding two questions was counted as two: '1 training user turns ...: 2 turns hold'."""
    example = load_example("near_duplicate_audit")
    other = "Write a persuasive essay arguing that cats are better pets than dogs, with three reasons."
    monkeypatch.setattr(example, "load_eval_questions", lambda: [QUESTION, other])
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"id": "a", "conversation": [{"role": "user", "content": f"{QUESTION} Also: {other}"}]}))
    example.main([str(data)])
    out = capsys.readouterr().out
    assert out.count("question: ") == 2 and "1 training user turns in 1 files: 1 turns hold >= 50%" in out


@pytest.mark.parametrize("argv", [["--threshold", "50"], ["--threshold", "-0.1"], ["--n", "0"], ["--n", "9"]])
def test_a_share_past_one_or_an_ngram_size_outside_the_questions_is_refused(argv, tmp_path, monkeypatch, capsys):
    """``--threshold 50`` (meant as 50%) found nothing and said '>= 5000%'; ``--n 0`` matched every turn to every
    question; ``--n 9`` left the 8-word questions without an n-gram, still counted as audited."""
    example = load_example("near_duplicate_audit")
    monkeypatch.setattr(example, "load_eval_questions", lambda: pytest.fail("loaded the evaluation questions"))
    with pytest.raises(SystemExit) as exit_info:
        example.main([str(tmp_path / "train.jsonl"), *argv])
    assert exit_info.value.code == 2
    assert f"error: {' '.join(argv)}" in capsys.readouterr().err
