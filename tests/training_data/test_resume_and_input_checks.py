"""Resuming an output with other settings, and inputs that were read wrong without a word (audit E)."""

from __future__ import annotations

import copy
import io
import json
import logging
import sys
from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from hf_adaptive_spec.default_model import DEFAULT_MODEL_ID
from hf_adaptive_spec.training_data.json_stream import iter_json_array
from hf_adaptive_spec.training_data.jsonl_output import drop_partial_last_line, written_ids
from hf_adaptive_spec.training_data.leakage import drop_leaked, eval_question_digests, question_digests
from hf_adaptive_spec.training_data.output_settings import check_output_settings, settings_path, write_output_settings
from hf_adaptive_spec.training_data.regenerate import (
    RegenerationConfig,
    copy_conversations,
    generate_reply_ids,
    prompt_ids,
    regenerate,
)
from hf_adaptive_spec.training_data.sharegpt import Conversation, iter_sharegpt


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, "trainers")
    try:
        import regenerate_sharegpt
    finally:
        sys.path.remove("trainers")
    return regenerate_sharegpt


def _parse(script, *argv: str):
    return script.make_parser().parse_args_into_dataclasses(list(argv))


def _conversation(conversation_id: str, question: str = "hello world") -> Conversation:
    return Conversation(conversation_id, [{"role": "user", "content": question},
                                          {"role": "assistant", "content": "original answer"}])


def _record(conversation_id: str) -> str:
    return json.dumps({"id": conversation_id, "conversation": _conversation(conversation_id).messages}) + "\n"


def _started(output: Path, settings: dict) -> None:
    """``output`` as a run with ``settings`` leaves it after its first records."""
    output.write_text(_record("a"), encoding="utf-8")
    write_output_settings(output, settings)


# 1: the held-out file is part of the settings


def test_a_resume_that_drops_or_changes_the_held_out_file_is_refused_naming_it(script, tmp_path: Path) -> None:
    """A resume without --exclude-ids-from appended the held-out conversations to the training file."""
    held_out, other = tmp_path / "heldout.jsonl", tmp_path / "other.jsonl"
    held_out.write_text(_record("s0") + _record("s4"), encoding="utf-8")
    other.write_text(_record("s1"), encoding="utf-8")
    output = tmp_path / "train.jsonl"
    _started(output, script.check_resumed_output(*_parse(script, "--output", str(output), "--exclude-ids-from",
                                                         str(held_out))))
    with pytest.raises(ValueError, match=r"exclude_ids_from: 'the 2 ids of .*heldout.jsonl \(sha256 \w+\)' -> None"):
        script.check_resumed_output(*_parse(script, "--output", str(output)))
    with pytest.raises(ValueError, match=r"exclude_ids_from: 'the 2 ids of .*heldout.* -> 'the 1 ids of .*other"):
        script.check_resumed_output(*_parse(script, "--output", str(output), "--exclude-ids-from", str(other)))
    moved = tmp_path / "moved.jsonl"  # the same ids under another name: the same exclusion
    moved.write_text(held_out.read_text(encoding="utf-8"), encoding="utf-8")
    script.check_resumed_output(*_parse(script, "--output", str(output), "--exclude-ids-from", str(moved)))


# 2: an output with records and no settings file


def test_an_output_without_settings_is_warned_about_and_given_this_runs(tmp_path: Path, caplog) -> None:
    """A concatenated output was added to with any settings, each time, without a word."""
    output = tmp_path / "joined.jsonl"
    output.write_text(_record("a") + _record("b"), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        copy_conversations([_conversation("c")], output, {"task": "chat"})
    assert "holds 2 records but no settings file" in caplog.text and "cannot check" in caplog.text
    assert json.loads(settings_path(output).read_text(encoding="utf-8")) == {"answers": "original", "task": "chat"}
    with pytest.raises(ValueError, match=r"other settings \(task: 'chat' -> 'translation'\)"):
        copy_conversations([_conversation("d")], output, {"task": "translation"})


# 3: the Python API checks the settings as the script does


def test_the_api_refuses_to_resume_a_file_made_with_other_settings(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    output = tmp_path / "out.jsonl"
    regenerate(tiny_model, tiny_tokenizer, [_conversation("a")], output, RegenerationConfig(max_new_tokens=2))
    stored = json.loads(settings_path(output).read_text(encoding="utf-8"))
    assert (stored["max_new_tokens"], stored["dtype"], stored["device"], stored["batch_size"]) == (2, "float32", "cpu",
                                                                                                   16)
    with pytest.raises(ValueError, match=r"other settings \(max_new_tokens: 2 -> 4\)"):
        regenerate(tiny_model, tiny_tokenizer, [_conversation("b")], output, RegenerationConfig(max_new_tokens=4))
    with pytest.raises(ValueError, match=r"other settings \(seed: 0 -> 1\)"):
        regenerate(tiny_model, tiny_tokenizer, [_conversation("b")], output, RegenerationConfig(max_new_tokens=2),
                   seed=1)
    assert written_ids(output) == {"a"}
    # a file the script started records where its conversations came from: the call from Python is told how to give it
    write_output_settings(output, {**stored, "task": "chat"})
    with pytest.raises(ValueError, match=r"task: 'chat' -> None\).*name task, which this call does not give: from "
                                         r"Python, pass them as regenerate\(\.\.\., settings=\{\.\.\.\}\)"):
        regenerate(tiny_model, tiny_tokenizer, [_conversation("b")], output, RegenerationConfig(max_new_tokens=2))
    regenerate(tiny_model, tiny_tokenizer, [_conversation("b")], output, RegenerationConfig(max_new_tokens=2),
               settings={"task": "chat"})
    assert written_ids(output) == {"a", "b"}


# 4: batch size and device, compared in half precision only


def test_in_bfloat16_another_batch_size_or_device_is_refused_in_float32_not(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    """A bfloat16 answer depends on the batch it is generated in (the audit: 9 of 24 differ from one-at-a-time)."""
    half = copy.deepcopy(tiny_model).to(torch.bfloat16)
    output = tmp_path / "bf16.jsonl"
    regenerate(half, tiny_tokenizer, [_conversation("a")], output, RegenerationConfig(max_new_tokens=2, batch_size=2))
    with pytest.raises(ValueError, match=r"other settings \(batch_size: 2 -> 4\) \(in bfloat16 .* same batch size"):
        regenerate(half, tiny_tokenizer, [_conversation("b")], output, RegenerationConfig(max_new_tokens=2,
                                                                                          batch_size=4))
    stored = json.loads(settings_path(output).read_text(encoding="utf-8"))
    with pytest.raises(ValueError, match=r"device: 'cpu' -> 'cuda'"):
        check_output_settings(output, {**stored, "device": "cuda"})
    output = tmp_path / "fp32.jsonl"
    regenerate(tiny_model, tiny_tokenizer, [_conversation("a")], output, RegenerationConfig(max_new_tokens=2,
                                                                                            batch_size=2))
    stats = regenerate(tiny_model, tiny_tokenizer, [_conversation("b")], output,
                       RegenerationConfig(max_new_tokens=2, batch_size=4))
    assert stats.written == 1
    assert json.loads(settings_path(output).read_text(encoding="utf-8"))["batch_size"] == 2  # recorded, the first's


def test_settings_written_before_batch_size_and_device_were_kept_are_not_compared_on_them(tmp_path: Path,
                                                                                          caplog) -> None:
    output = tmp_path / "old.jsonl"
    old = {"model": None, "dtype": "bfloat16", "seed": 0, "max_new_tokens": 4}
    _started(output, old)
    with caplog.at_level(logging.WARNING):
        assert not check_output_settings(output, {**old, "batch_size": 32, "device": "cuda"})
    assert "written before batch_size, device were kept" in caplog.text


# 5: a whole last record without its newline is kept


def test_a_whole_last_record_without_a_newline_is_kept_and_a_cut_one_is_dropped_with_a_warning(
    tmp_path: Path, caplog
) -> None:
    output = tmp_path / "out.jsonl"
    output.write_text(_record("kept1") + _record("kept2").rstrip("\n"), encoding="utf-8")
    copy_conversations([_conversation("c0")], output)
    assert [json.loads(line)["id"] for line in output.read_text(encoding="utf-8").splitlines()] == ["kept1", "kept2",
                                                                                                    "c0"]
    output.write_text(_record("kept1") + '{"id": "cut", "conver', encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        drop_partial_last_line(output)
    assert output.read_text(encoding="utf-8") == _record("kept1")
    assert f"{output}: its last line" in caplog.text and "was cut" in caplog.text


# 6: no settings left by a run that failed early; --dtype choices; the default model by name


def test_a_run_that_fails_before_writing_leaves_no_settings_and_its_rerun_is_not_refused(
    script, tmp_path: Path, tiny_model, tiny_tokenizer, caplog
) -> None:
    output = tmp_path / "c2.jsonl"
    with pytest.raises((OSError, ValueError)), caplog.at_level(logging.INFO):
        script.main(*_parse(script, "--output", str(output), "--model", str(tmp_path / "no_such_model"),
                            "--device", "cpu"))
    assert not settings_path(output).exists()
    digests = eval_question_digests()  # a several-line question's first-line entries are no questions of their own
    whole = sum(":" not in digest for digest in digests)
    assert f"{whole} evaluation questions kept out ({len(digests)} digests)" in caplog.text and whole < len(digests)
    caplog.clear()
    settings_path(output).write_text(json.dumps({"max_new_tokens": 256}), encoding="utf-8")  # left by older versions
    settings = script.check_resumed_output(*_parse(script, "--output", str(output), "--max-new-tokens", "4"))
    with caplog.at_level(logging.WARNING):
        assert check_output_settings(output, settings)  # as regenerate checks it: the settings are to be written
    assert "holds no records: its settings file" in caplog.text and "is ignored" in caplog.text
    with pytest.raises(SystemExit):  # a choice, not torch's AttributeError
        _parse(script, "--output", str(output), "--dtype", "bf16")


@pytest.mark.parametrize("before", ["a", None], ids=["after-records", "in-the-first-batch"])
def test_the_same_command_resumes_after_a_crash_cut_the_last_line(script, tmp_path: Path, before) -> None:
    """The script's check before the model loads counted the output's records and refused the line a crash cut ('not
    JSON ... fix or remove the line'), which regenerate() drops before appending: rerunning the same command after a
    crash no longer resumed (found by the review)."""
    output = tmp_path / "out.jsonl"
    argv = ("--output", str(output), "--device", "cpu")
    settings = script.check_resumed_output(*_parse(script, *argv))
    cut = '{"id": "c", "conversation": [{"role": "us'
    output.write_text((_record(before) if before else "") + cut, encoding="utf-8")
    write_output_settings(output, settings)
    script.check_resumed_output(*_parse(script, *argv))
    assert written_ids(output, skip_cut_last_line=True) == ({before} if before else set())
    with pytest.raises(ValueError, match="not JSON"):  # elsewhere a line that is not JSON is still refused
        written_ids(output)


def test_the_default_model_by_name_is_the_default(script, tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    settings = script.check_resumed_output(*_parse(script, "--output", str(output)))
    _started(output, {**settings, "model": None})  # as files written before the name was kept
    script.check_resumed_output(*_parse(script, "--output", str(output), "--model", DEFAULT_MODEL_ID))
    script.check_resumed_output(*_parse(script, "--output", str(output)))


# 7: a ShareGPT file in another layout


def test_a_sharegpt_file_in_another_layout_is_refused_naming_both_layouts(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    records = [{"id": f"r{i}", "messages": [{"role": "user", "content": "hi"}]} for i in range(3)]
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(ValueError, match=r"none of its 3 records .* expected a JSON array of records .*'conversations'"
                                         r".*'from'.* found records with keys \['id', 'messages'\], turns with keys "
                                         r"\['content', 'role'\]"):
        list(iter_sharegpt(path))


def test_asking_for_more_conversations_than_the_file_holds_is_warned_about(
    script, tmp_path: Path, tiny_model, tiny_tokenizer, caplog
) -> None:
    tiny_model.save_pretrained(tmp_path / "target")
    tiny_tokenizer.save_pretrained(tmp_path / "target")
    turns = [{"from": "human", "value": "hello world"}, {"from": "gpt", "value": "ok"}]
    (tmp_path / "share.json").write_text(json.dumps([{"id": "x", "conversations": turns}]), encoding="utf-8")
    (tmp_path / "eval" / "gsm8k").mkdir(parents=True)
    (tmp_path / "eval" / "gsm8k" / "test.jsonl").write_text(json.dumps({"question": "q"}) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        script.main(*_parse(script, "--output", str(tmp_path / "out.jsonl"), "--answers", "original", "--model",
                            str(tmp_path / "target"), "--sharegpt-file", str(tmp_path / "share.json"),
                            "--num-conversations", "5", "--device", "cpu", "--eval-data-dir", str(tmp_path / "eval")))
    assert "--num-conversations 5 asked for, but the file yields 1" in caplog.text


# 8: the leakage filter


def _questions(*texts: str) -> frozenset[str]:
    return frozenset().union(*map(question_digests, texts))


def test_invisible_format_characters_do_not_hide_a_question() -> None:
    digests = _questions("What is the capital of France?")
    texts = ["What is the\u200b capital of France?", "\ufeffWhat is the capital of France?",
             "What is the cap\u00adital of France?"]
    assert list(drop_leaked([_conversation(str(i), text) for i, text in enumerate(texts)], digests)) == []


def test_a_several_line_question_pasted_after_or_before_other_text_is_caught() -> None:
    question = "Consider the table:\n\nA | B\n1 | 2\n\nWhat is the sum of A and B?"
    digests = _questions(question)
    wrapped = [f"Please answer the following.\n{question}", f"Some context.\n\n{question}\n\nThanks!",
               f"{question}\nThanks a lot", f"intro\n{question}\noutro"]
    kept = [_conversation("fresh", "Consider the table:\nA | B\n1 | 3\nWhat is the sum of A and B?")]
    conversations = [_conversation(str(i), text) for i, text in enumerate(wrapped)] + kept
    assert [c.id for c in drop_leaked(conversations, digests)] == ["fresh"]


# 9: text after a JSON array


def test_text_after_the_arrays_closing_bracket_is_an_error_naming_the_offset(tmp_path: Path) -> None:
    """Two arrays joined with cat lost the second without a word."""
    path = tmp_path / "joined.json"
    path.write_text('[{"id": "a"}, {"id": "b"}]\n[{"id": "c"}]', encoding="utf-8")
    with open(path, encoding="utf-8") as stream, pytest.raises(
        ValueError, match=rf"{path}: text after the JSON array's closing '\]', at character offset 27 .*Merge the"
    ):
        list(iter_json_array(stream, chunk_size=4))
    with pytest.raises(ValueError, match="offset 3"):
        list(iter_json_array(io.StringIO("[] oops")))
    assert list(iter_json_array(io.StringIO('[{"a": 1}]  \n'))) == [{"a": 1}]


# 10: system turns


def test_a_system_turn_stays_in_the_prompt_answered_and_counts_in_its_length(
    tiny_model: LlamaForCausalLM, tiny_tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    system = {"role": "system", "content": "tell me more the cat sat on the mat"}
    conversation = Conversation("s", [system, {"role": "user", "content": "hello world"},
                                      {"role": "assistant", "content": "x"}])
    asked = [system, {"role": "user", "content": "hello world"}]
    config = RegenerationConfig(max_new_tokens=4)
    regenerate(tiny_model, tiny_tokenizer, [conversation], tmp_path / "out.jsonl", config)
    record = json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))
    assert [m["role"] for m in record["conversation"]] == ["system", "user", "assistant"]
    replies, _, _ = generate_reply_ids(tiny_model, tiny_tokenizer, [prompt_ids(tiny_tokenizer, asked)], config)
    assert record["conversation"][2]["token_ids"] == replies[0]
    length = len(prompt_ids(tiny_tokenizer, asked))
    stats = regenerate(tiny_model, tiny_tokenizer, [conversation], tmp_path / "short.jsonl",
                       RegenerationConfig(max_new_tokens=4, max_prompt_tokens=length - 1))
    assert stats.too_long == 1


# 11: raw failures


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"id": "a", "conversation": []}\n{not json}\n', r":2: not JSON"),
        ('{"conversation": []}\n', r":1: the record has no id"),
        (json.dumps([{"id": "z", "conversations": []}]) + "\n", r":1: a JSON list, not an object \(the file looks like "
                                                                 r"a JSON array"),
    ],
)
def test_an_output_or_held_out_file_that_is_no_jsonl_of_records_is_refused_by_file_and_line(
    script, tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "file.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{path}{message}"):
        copy_conversations([_conversation("c")], path)
    with pytest.raises(ValueError, match=rf"{path}{message}"):
        list(script.without_held_out([_conversation("c")], path))


def test_a_held_out_record_without_a_conversation_list_is_refused_by_line(script, tmp_path: Path) -> None:
    path = tmp_path / "heldout.jsonl"
    path.write_text(_record("a") + json.dumps({"id": "b", "conversations": []}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{path}:2: no 'conversation' list"):
        list(script.without_held_out([_conversation("c")], path))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"id": "a", "conversations": "hello"}, r"record 1: its 'conversations' is a str, not a list"),
        ({"id": "a", "conversations": ["hello"]}, r"record 1: turn 0 of its 'conversations' is a str"),
        ({"conversations": [{"from": "human", "value": "hi"}]}, r"record 1: it has no id"),
        ({"id": "7", "conversations": [{"from": "human", "value": "hi"}]}, r"record 1 has the id '7' and an earlier "
                                                                            r"record 7: both would be written as '7'"),
    ],
)
def test_a_malformed_sharegpt_record_is_refused_naming_the_file_and_record(tmp_path: Path, record, message) -> None:
    path = tmp_path / "share.json"
    path.write_text(json.dumps([{"id": 7, "conversations": [{"from": "human", "value": "hi"}]}, record]),
                    encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{path}: {message}"):
        list(iter_sharegpt(path))


def test_a_target_with_no_end_of_sequence_or_pad_token_is_refused_naming_the_setting(
    tiny_model: LlamaForCausalLM, make_tiny_tokenizer, monkeypatch, tmp_path: Path
) -> None:
    tokenizer = make_tiny_tokenizer()
    tokenizer.pad_token = None
    tokenizer.eos_token = None
    monkeypatch.setattr(tiny_model.generation_config, "eos_token_id", None)
    with pytest.raises(ValueError, match="no end-of-sequence token .* Set tokenizer.eos_token"):
        regenerate(tiny_model, tokenizer, [_conversation("a")], tmp_path / "out.jsonl", RegenerationConfig())
    assert not (tmp_path / "out.jsonl").exists() and not settings_path(tmp_path / "out.jsonl").exists()
