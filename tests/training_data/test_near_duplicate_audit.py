"""``examples/near_duplicate_audit.py`` finds an evaluation question pasted inside a longer turn or lightly reworded,
which the leakage filter's exact match misses, and not a turn that only shares a template with it."""

from __future__ import annotations

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
