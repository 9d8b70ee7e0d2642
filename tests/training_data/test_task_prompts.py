import json
from pathlib import Path

import pytest

from hf_adaptive_spec.training_data import task_prompts
from hf_adaptive_spec.training_data.sharegpt import Conversation, Message
from hf_adaptive_spec.training_data.task_prompts import (
    german_sentences,
    looks_english_prose,
    looks_german,
    summarization_prompts,
    translation_prompts,
)

GERMAN = (
    "Die Kugelblitze sind ein bisher noch unzureichend verstandenes Naturphänomen. "
    "Es gibt verschiedene Theorien zur Erklärung, aber keine von ihnen ist allgemein anerkannt. Ja."
)
ENGLISH = (
    "The committee met on Tuesday to discuss the budget for the next year, and it was agreed that the "
    "funds for the library would be raised by a small amount. "
) * 8


def _conversation(conversation_id: str, *contents: str) -> Conversation:
    roles = ["user", "assistant"]
    return Conversation(
        id=conversation_id,
        messages=[Message(role=roles[index % 2], content=content) for index, content in enumerate(contents)],
    )


def test_language_checks_tell_german_from_english_and_code():
    assert looks_german(GERMAN)
    assert not looks_german(ENGLISH)
    assert looks_english_prose(ENGLISH)
    assert not looks_english_prose(GERMAN)
    assert not looks_english_prose("```python\n" + ENGLISH + "\n```")
    assert not looks_english_prose("x = [1, 2, 3]; y = {a: b} " * 20)


def test_german_sentences_split_and_drop_short_ones():
    sentences = list(german_sentences(GERMAN))
    assert sentences == [
        "Die Kugelblitze sind ein bisher noch unzureichend verstandenes Naturphänomen.",
        "Es gibt verschiedene Theorien zur Erklärung, aber keine von ihnen ist allgemein anerkannt.",
    ]


def test_translation_prompts_use_only_german_turns():
    built = list(translation_prompts([_conversation("a", ENGLISH, GERMAN), _conversation("b", ENGLISH)]))
    assert [conversation.id for conversation in built] == ["a:translate:0", "a:translate:1"]
    assert built[0].messages == [
        Message(
            role="user",
            content="Translate German to English: "
            "Die Kugelblitze sind ein bisher noch unzureichend verstandenes Naturphänomen.",
        )
    ]


def test_summarization_prompts_take_the_first_long_prose_turn_once():
    short = "The cat sat on the mat and it was happy."
    conversations = [_conversation("a", short, ENGLISH, ENGLISH + " More."), _conversation("b", short)]
    built = list(summarization_prompts(conversations))
    assert [conversation.id for conversation in built] == ["a:summarize"]
    assert built[0].messages[0]["content"] == "Summarize: " + ENGLISH.strip()
    assert len(built[0].messages) == 1


def test_summarization_length_bounds_are_words():
    assert not list(summarization_prompts([_conversation("a", ENGLISH)], min_words=1000))
    assert not list(summarization_prompts([_conversation("a", ENGLISH)], max_words=50))


def test_unknown_task_names_the_choices():
    with pytest.raises(ValueError, match="summarization"):
        task_prompts("paraphrase", [])


def test_one_german_looking_word_does_not_make_a_german_sentence():
    assert not list(german_sentences("excellent , thanks im downloading now"))


def test_regeneration_script_answers_task_requests_and_keeps_evaluation_texts_out(tmp_path, tiny_model, tiny_tokenizer):
    import sys

    sys.path.insert(0, "trainers")
    try:
        import regenerate_sharegpt
    finally:
        sys.path.remove("trainers")
    tiny_model.save_pretrained(tmp_path / "target")
    tiny_tokenizer.save_pretrained(tmp_path / "target")
    leaked, kept = GERMAN.split(". ")[:2]
    turns = [{"from": "human", "value": f"{leaked}. {kept}"}, {"from": "gpt", "value": "ok"}]
    records = [{"id": "x", "conversations": turns}]
    (tmp_path / "sharegpt.json").write_text(json.dumps(records), encoding="utf-8")
    (tmp_path / "eval" / "spec_bench").mkdir(parents=True)
    question = {"question_id": 1, "category": "translation", "turns": [f"Translate German to English: {leaked}."]}
    (tmp_path / "eval" / "spec_bench" / "question.jsonl").write_text(json.dumps(question) + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    regenerate_sharegpt.main(
        *regenerate_sharegpt.make_parser().parse_args_into_dataclasses(
            [
                "--output", str(output), "--task", "translation", "--model", str(tmp_path / "target"),
                "--sharegpt-file", str(tmp_path / "sharegpt.json"), "--eval-data-dir", str(tmp_path / "eval"),
                "--max-new-tokens", "2", "--device", "cpu",
            ]
        )
    )
    written = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [record["id"] for record in written] == ["x:translate:1"]
    assert written[0]["conversation"][0]["content"] == f"Translate German to English: {kept}"
    assert written[0]["conversation"][1]["role"] == "assistant"


def test_a_held_out_conversation_keeps_every_task_request_made_from_it(tmp_path):
    """--exclude-ids-from with a held-out file of task requests (ids '<conversation>:<task>...'): it compared the
    requests' ids with the conversations' before the requests were made, so it excluded nothing."""
    import sys

    from hf_adaptive_spec.training_data.sharegpt import Conversation

    sys.path.insert(0, "trainers")
    try:
        import regenerate_sharegpt
    finally:
        sys.path.remove("trainers")
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text(json.dumps({"id": "S1:translate:0", "conversation": []}) + "\n", encoding="utf-8")
    requests = [Conversation(id, []) for id in ("S1:translate:0", "S1:translate:1", "S2:summarize", "S3")]
    kept = [c.id for c in regenerate_sharegpt.without_held_out(requests, held_out)]
    assert kept == ["S2:summarize", "S3"]
    # the same opening prompt under another id: a greedy target would answer it as it answered the held-out one
    opening = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    held_out.write_text(json.dumps({"id": "S1_0", "conversation": opening}) + "\n", encoding="utf-8")
    others = [Conversation("S4_0", opening), Conversation("S5_0", [{"role": "user", "content": "hi!"}]),
              Conversation("S6_2", [{"role": "user", "content": "bye"}, {"role": "user", "content": "hi"}])]
    assert [c.id for c in regenerate_sharegpt.without_held_out(others, held_out)] == ["S5_0", "S6_2"]


def test_adding_to_an_output_keeps_the_settings_its_answers_were_made_with(tmp_path):
    import sys

    sys.path.insert(0, "trainers")
    try:
        import regenerate_sharegpt
    finally:
        sys.path.remove("trainers")
    parse = regenerate_sharegpt.make_parser().parse_args_into_dataclasses
    output = str(tmp_path / "out.jsonl")
    _started(output, regenerate_sharegpt.check_resumed_output(*parse(["--output", output, "--max-new-tokens", "4"])))
    regenerate_sharegpt.check_resumed_output(*parse(["--output", output, "--max-new-tokens", "4"]))  # the same: fine
    with pytest.raises(ValueError, match=r"other settings \(max_new_tokens: 4 -> 12; sampling: None -> \{.*\}; "
                                         r"sampling_seed: None -> .*; temperature: 0.0 -> 1.0\)"):
        regenerate_sharegpt.check_resumed_output(*parse(["--output", output, "--max-new-tokens", "12",
                                                         "--temperature", "1"]))
    _a_file_sampled_before_the_whole_distribution_is_not_added_to(regenerate_sharegpt, parse, tmp_path)
    with pytest.raises(ValueError, match="--answers original copies ShareGPT's answers, every turn: max_new_tokens"):
        regenerate_sharegpt.check_resumed_output(*parse(["--output", str(tmp_path / "o.jsonl"), "--answers", "original",
                                                         "--max-new-tokens", "12"]))


def _a_file_sampled_before_the_whole_distribution_is_not_added_to(regenerate_sharegpt, parse, tmp_path):
    """Files sampled before 2026-12-05 were cut to generate's default top-k of 50 (their settings name no sampling):
    adding answers from the whole distribution to one would mix the two without a word."""
    output = tmp_path / "sampled.jsonl"
    argv = ["--output", str(output), "--temperature", "0.8"]
    _started(output, regenerate_sharegpt.check_resumed_output(*parse(argv)))
    settings = Path(str(output) + ".settings.json")
    stored = json.loads(settings.read_text(encoding="utf-8"))
    assert stored["sampling"] == {"do_sample": True, "temperature": 0.8, "top_k": 0, "top_p": 1.0, "min_p": None,
                                  "top_h": None, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0}
    assert stored["sampling_seed"] == "per batch, from --seed and the batch's conversation ids"
    regenerate_sharegpt.check_resumed_output(*parse(argv))  # the same: fine
    del stored["sampling"]
    settings.write_text(json.dumps(stored), encoding="utf-8")
    with pytest.raises(ValueError, match=r"other settings \(sampling: None -> "):
        regenerate_sharegpt.check_resumed_output(*parse(argv))


def _started(output, settings):
    """``output`` as a run with ``settings`` leaves it after its first records: one record, and its settings."""
    from hf_adaptive_spec.training_data.output_settings import write_output_settings

    Path(output).write_text(json.dumps({"id": "a", "conversation": []}) + "\n", encoding="utf-8")
    write_output_settings(output, settings)
