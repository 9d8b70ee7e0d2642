"""Resuming: the progress file skips finished (question, method) pairs and guards its settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_adaptive_spec.bench.errors import BenchError
from hf_adaptive_spec.bench.progress import ProgressLog, progress_path_for
from hf_adaptive_spec.bench.questions import load_questions
from hf_adaptive_spec.bench.records import QuestionRecord, TurnRecord
from hf_adaptive_spec.bench.runner import run_benchmark

from .bench_fakes import ScriptedMethod

SETTINGS = {"model": "tiny", "options": {"max_new_tokens": 8}}


def test_progress_path_sits_next_to_the_json_report(tmp_path: Path):
    assert progress_path_for(tmp_path / "run.json") == tmp_path / "run.progress.jsonl"


def test_resume_skips_completed_pairs(bench_model, questions_file: Path, tmp_path: Path):
    model, tokenizer = bench_model
    path = tmp_path / "run.progress.jsonl"
    questions = load_questions(questions_file)
    first_calls = []
    methods = {"stock": ScriptedMethod("stock", [5, 6], first_calls), "x": ScriptedMethod("x", [5, 6], first_calls)}
    first = run_benchmark(model, tokenizer, questions[:1], methods, log=ProgressLog(path, SETTINGS, resume=False))

    calls = []
    methods = {"stock": ScriptedMethod("stock", [5, 6], calls), "x": ScriptedMethod("x", [5, 7], calls)}
    log = ProgressLog(path, SETTINGS, resume=True)
    assert set(log.completed) == {(1, "stock"), (1, "x")}
    records = run_benchmark(model, tokenizer, questions, methods, warmup=1, log=log)

    warmup, question_2, question_3 = ["stock", "x"], ["stock", "stock", "x", "x"], ["stock", "x"]
    assert [label for label, _ in calls] == warmup + question_2 + question_3
    assert [record.to_dict() for record in records[:2]] == [record.to_dict() for record in first]
    assert records[3].turns[0].identical is False  # the new x differs from stock, loaded or not
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])["settings"]
    assert len(header.pop("sessions")) == 2 and header == SETTINGS and len(lines) == 1 + 6
    assert [record.session for record in records] == [0, 0, 1, 1, 1, 1]  # each record names the session it ran in


def test_nothing_pending_runs_nothing_not_even_warmup(bench_model, questions_file: Path, tmp_path: Path):
    model, tokenizer = bench_model
    path = tmp_path / "run.progress.jsonl"
    questions = load_questions(questions_file, limit=1)
    methods = {"stock": ScriptedMethod("stock", [5], [])}
    run_benchmark(model, tokenizer, questions, methods, log=ProgressLog(path, SETTINGS, resume=False))
    calls = []
    methods = {"stock": ScriptedMethod("stock", [5], calls)}
    run_benchmark(model, tokenizer, questions, methods, warmup=3, log=ProgressLog(path, SETTINGS, resume=True))
    assert calls == []


def test_without_resume_the_file_starts_afresh(tmp_path: Path):
    path = tmp_path / "run.progress.jsonl"
    ProgressLog(path, SETTINGS, resume=False).append(QuestionRecord(1, "a", "stock", [TurnRecord(0, 3, 0.1, True)]))
    assert ProgressLog(path, SETTINGS, resume=False).completed == {}
    assert ProgressLog(path, SETTINGS, resume=True).completed == {}
    assert len(path.read_text().splitlines()) == 1


def test_resume_with_other_settings_is_refused(tmp_path: Path):
    path = tmp_path / "run.progress.jsonl"
    ProgressLog(path, SETTINGS, resume=False)
    with pytest.raises(BenchError, match=r"other settings \(options\.max_new_tokens: 8 -> 16\); pass the same values"):
        ProgressLog(path, {**SETTINGS, "options": {"max_new_tokens": 16}}, resume=True)
    with pytest.raises(BenchError, match=r"\(dtype: None -> 'bfloat16'; model: 'tiny' -> 'other'\)"):
        ProgressLog(path, {**SETTINGS, "model": "other", "dtype": "bfloat16"}, resume=True)


def test_a_file_written_before_questions_were_digested_resumes_on_its_path(tmp_path: Path):
    path = tmp_path / "run.progress.jsonl"
    ProgressLog(path, SETTINGS, resume=False)
    assert ProgressLog(path, {**SETTINGS, "questions_digest": "0123"}, resume=True).completed == {}
    ProgressLog(path, {**SETTINGS, "questions_digest": "0123"}, resume=False)
    with pytest.raises(BenchError, match=r"questions_digest: '0123' -> '4567'"):
        ProgressLog(path, {**SETTINGS, "questions_digest": "4567"}, resume=True)


def test_a_line_cut_short_is_dropped_and_the_file_repaired(tmp_path: Path):
    path = tmp_path / "run.progress.jsonl"
    log = ProgressLog(path, SETTINGS, resume=False)
    log.append(QuestionRecord(1, "a", "stock", [TurnRecord(0, 3, 0.1, True, output_ids=[1, 2, 3])]))
    with path.open("a") as file:
        file.write('{"question_id": 2, "categ')
    log = ProgressLog(path, SETTINGS, resume=True)
    assert list(log.completed) == [(1, "stock")]
    assert log.completed[(1, "stock")].turns[0].output_ids == [1, 2, 3]
    log.append(QuestionRecord(2, "a", "stock", [TurnRecord(0, 3, 0.1, True)]))
    assert list(ProgressLog(path, SETTINGS, resume=True).completed) == [(1, "stock"), (2, "stock")]


def test_resume_compares_the_weights_of_the_methods_the_file_names(tmp_path: Path):
    """The target's digest and those of each method in both the file and the run must match; a method new to the run
    adds its digests to the header; a file written before the digests resumes on its paths alone."""
    path = tmp_path / "run.progress.jsonl"

    def loaded(target="t", **methods):
        return {**SETTINGS, "loaded": {"target": target, "methods": methods}}

    ProgressLog(path, loaded(x={"drafter": "a"}), resume=False)
    ProgressLog(path, loaded(x={"drafter": "a"}, y={"policy": "p"}), resume=True)  # y is new: added
    header = json.loads(path.read_text().splitlines()[0])["settings"]
    assert {**header, "sessions": None} == {**loaded(x={"drafter": "a"}, y={"policy": "p"}), "sessions": None}
    ProgressLog(path, loaded(y={"policy": "p"}), resume=True)  # x not run now: not compared
    with pytest.raises(BenchError, match=r"other weights than this run loads \(loaded.methods.y.policy: 'p' -> 'q'\)"):
        ProgressLog(path, loaded(y={"policy": "q"}), resume=True)
    with pytest.raises(BenchError, match=r"loaded.target: 't' -> 'u'"):
        ProgressLog(path, loaded("u", x={"drafter": "a"}), resume=True)
    ProgressLog(path, SETTINGS, resume=False)  # written before the digests
    ProgressLog(path, loaded(x={"drafter": "b"}), resume=True)



def _loaded_policy(policy="p", config="c", weights="w", drafter="d", files=True) -> dict:
    """Settings whose loaded digests name method x's drafter and policy, and (``files``) the policy's by file."""
    loaded = {"target": "t", "methods": {"x": {"drafter": drafter, "policy": policy}}}
    if files:
        loaded["policy_files"] = {"x": {"config.json": config, "model.safetensors": weights}}
    return {**SETTINGS, "loaded": loaded}


def _refusal(path: Path, settings: dict) -> str:
    with pytest.raises(BenchError) as refused:
        ProgressLog(path, settings, resume=True)
    return str(refused.value)


def test_a_refused_resume_names_the_policy_files_that_changed(tmp_path: Path):
    """Four policy folders whose config.json alone was edited (a lookup-branch setting added) were refused as
    'retrained or replaced at its path': the file records each policy's digest by file, and the refusal names the
    files that differ (still refusing: a policy drafts by its settings too)."""
    path = tmp_path / "run.progress.jsonl"
    ProgressLog(path, _loaded_policy(), resume=False)
    edited = _refusal(path, _loaded_policy("q", config="c2"))
    assert ("other policy settings than this run loads: x's policy changed in config.json, not in model.safetensors"
            " (loaded.methods.x.policy: 'p' -> 'q'). Only config.json was edited since the run began, no weights"
            ) in edited
    assert "Restore the config.json the run began with" in edited and "retrained or replaced" not in edited
    retrained = _refusal(path, _loaded_policy("q", weights="w2"))
    assert ("x's policy changed in model.safetensors, not in config.json (loaded.methods.x.policy: 'p' -> 'q'). A "
            "model, drafter or policy was retrained, edited or replaced") in retrained
    with_drafter = _refusal(path, _loaded_policy("q", config="c2", drafter="e"))  # not a settings edit alone
    assert ("x's policy changed in config.json, not in model.safetensors (loaded.methods.x.drafter: 'd' -> 'e'; "
            "loaded.methods.x.policy: 'p' -> 'q'). A model, drafter or policy was retrained") in with_drafter
    assert ProgressLog(path, _loaded_policy(), resume=True).completed == {}  # the same policy resumes


def test_a_file_written_before_the_policy_file_digests_is_refused_as_before(tmp_path: Path):
    """Its policies have one digest each: the refusal cannot tell a settings edit from a retrain. A method new to the
    run adds its file digests, named when that method's policy changes."""
    path = tmp_path / "run.progress.jsonl"
    ProgressLog(path, _loaded_policy(files=False), resume=False)
    with pytest.raises(BenchError, match=r"other weights than this run loads \(loaded\.methods\.x\.policy: 'p' -> "
                                         r"'q'\): a model, drafter or policy was retrained or replaced at its path"):
        ProgressLog(path, _loaded_policy("q", config="c2"), resume=True)
    with_y = _loaded_policy()
    with_y["loaded"]["methods"]["y"] = {"policy": "r"}
    with_y["loaded"]["policy_files"]["y"] = {"config.json": "cy"}
    ProgressLog(path, with_y, resume=True)
    header = json.loads(path.read_text().splitlines()[0])["settings"]["loaded"]
    assert header["policy_files"] == {"y": {"config.json": "cy"}} and header["methods"]["y"] == {"policy": "r"}
    with_y["loaded"]["methods"]["y"], with_y["loaded"]["policy_files"]["y"] = {"policy": "s"}, {"config.json": "cy2"}
    with pytest.raises(BenchError, match=r"y's policy changed in config\.json \(loaded\.methods\.y\.policy: 'r' -> "
                                         r"'s'\)\. Only config\.json was edited"):
        ProgressLog(path, with_y, resume=True)


def test_a_file_written_before_sessions_were_numbered_keeps_its_records_apart_from_a_resumes(
    bench_model, questions_file: Path, tmp_path: Path
):
    """Its records carry no session: the resume numbered itself session 0, the old records read as unknown, and a
    method added then was reported as interleaved with them. The earlier sessions get the first place; a record of
    no session is of another session than a numbered one."""
    from hf_adaptive_spec.bench.progress import EARLIER_SESSIONS
    from hf_adaptive_spec.bench.report import not_interleaved

    model, tokenizer = bench_model
    path = tmp_path / "run.progress.jsonl"
    questions = load_questions(questions_file)[:2]
    run_benchmark(model, tokenizer, questions, {"stock": ScriptedMethod("stock", [5, 6], [])},
                  log=ProgressLog(path, SETTINGS, resume=False))
    lines = path.read_text().splitlines()  # as an older version wrote it: no sessions anywhere
    records = [{key: value for key, value in json.loads(line).items() if key != "session"} for line in lines[1:]]
    path.write_text("\n".join([json.dumps({"settings": SETTINGS}), *map(json.dumps, records)]) + "\n")
    log = ProgressLog(path, SETTINGS, resume=True)
    methods = {"stock": ScriptedMethod("stock", [5, 6], []), "x": ScriptedMethod("x", [5, 6], [])}
    measured = run_benchmark(model, tokenizer, questions, methods, log=log)
    assert [(record.method, record.session) for record in measured] == [("stock", None), ("x", 1)] * 2
    assert json.loads(path.read_text().splitlines()[0])["settings"]["sessions"][0] == EARLIER_SESSIONS
    assert not_interleaved(measured, "stock") == {"x": 2}


def test_a_session_that_measures_nothing_is_not_listed(bench_model, questions_file: Path, tmp_path: Path):
    model, tokenizer = bench_model
    path = tmp_path / "run.progress.jsonl"
    questions = load_questions(questions_file)[:1]
    methods = {"stock": ScriptedMethod("stock", [5], [])}
    run_benchmark(model, tokenizer, questions, methods, log=ProgressLog(path, SETTINGS, resume=False))
    run_benchmark(model, tokenizer, questions, methods, log=ProgressLog(path, SETTINGS, resume=True))
    assert len(json.loads(path.read_text().splitlines()[0])["settings"]["sessions"]) == 1
