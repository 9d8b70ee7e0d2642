"""``main([...])`` end to end on the tiny model, errors, and the ``hf-adaptive-spec`` dispatcher."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hf_adaptive_spec import cli as top_level
from hf_adaptive_spec.bench.arguments import MethodOptions
from hf_adaptive_spec.bench.cli import _size_static_cache, main
from hf_adaptive_spec.bench.errors import BenchError
from hf_adaptive_spec.bench.paired import main as paired_main
from hf_adaptive_spec.bench.progress import ProgressLog
from hf_adaptive_spec.core.settings import sampling_kwargs


def bench_argv(model_dir: Path, questions: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--model", str(model_dir), "--questions", str(questions), "--methods", "stock,hf-prompt-lookup",
        "--max-new-tokens", "6", "--warmup", "1", "--num-threads", "1", "--no-progress", "--json", str(out), *extra,
    ]  # fmt: skip


def test_end_to_end_run_writes_the_required_summary(bench_model_dir: Path, questions_file: Path, tmp_path: Path):
    out = tmp_path / "out.json"
    argv = bench_argv(bench_model_dir, questions_file, out, "--limit", "2")
    argv += ["--markdown", str(tmp_path / "out.md"), "--plots", str(tmp_path / "plots")]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert list(report["summary"]) == ["stock", "hf-prompt-lookup"]
    for figures in report["summary"].values():
        assert {"mean_accepted_tokens", "speedup", "identical"} <= set(figures)
        assert figures["identical"] is True and figures["questions"] == 2
    assert report["summary"]["stock"]["speedup"] == pytest.approx(1.0)
    assert report["summary"]["hf-prompt-lookup"]["speedup"] > 0
    assert set(report["summary"]["stock"]["categories"]) == {"writing", "math"}
    assert [(r["question_id"], r["method"]) for r in report["records"]] == [
        (1, "stock"), (1, "hf-prompt-lookup"), (2, "stock"), (2, "hf-prompt-lookup"),
    ]  # fmt: skip
    assert report["settings"]["options"]["max_new_tokens"] == 6 and report["settings"]["limit"] == 2
    assert "| hf-prompt-lookup | 2 |" in (tmp_path / "out.md").read_text()
    assert len(list((tmp_path / "plots").glob("*.png"))) == 4
    assert (tmp_path / "out.progress.jsonl").is_file()


def test_resume_keeps_finished_measurements(bench_model_dir: Path, questions_file: Path, tmp_path: Path):
    out = tmp_path / "out.json"
    assert main(bench_argv(bench_model_dir, questions_file, out, "--limit", "1")) == 0
    first = json.loads(out.read_text())["records"]
    assert main(bench_argv(bench_model_dir, questions_file, out, "--resume")) == 0
    records = json.loads(out.read_text())["records"]
    assert len(records) == 6
    assert records[:2] == first  # same wall times: not run again
    # another sampling seed would mix two runs' samples in one report: refused
    assert main(bench_argv(bench_model_dir, questions_file, out, "--resume", "--seed", "7")) == 2


def test_a_second_run_writing_the_same_progress_file_is_refused_not_mixed_in(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path, monkeypatch, capsys
):
    """Two runs sharing one --json at once (a job started again while the first still ran) wrote their records into
    one progress file: the second's, measured with --max-new-tokens 3, came under the first's header (6 tokens), which
    --resume read as the first run's. Started after the first run's first record (when the progress file has been
    replaced whole with a new header), the second is refused, naming the file and the way out."""
    out = tmp_path / "out.json"
    append, seconds = ProgressLog.append, []

    def append_while_another_run_starts(log, record):
        append(log, record)
        if not seconds:
            seconds.append("started")  # the second run's records pass here too
            seconds[0] = main(bench_argv(bench_model_dir, questions_file, out, "--limit", "1", "--max-new-tokens", "3"))

    monkeypatch.setattr(ProgressLog, "append", append_while_another_run_starts)
    assert main(bench_argv(bench_model_dir, questions_file, out, "--limit", "2")) == 0
    assert seconds == [2]
    assert "is being written by another bench run with --json" in capsys.readouterr().err
    lines = (tmp_path / "out.progress.jsonl").read_text().splitlines()
    assert [(json.loads(line)["question_id"], json.loads(line)["method"]) for line in lines[1:]] == [
        (1, "stock"), (1, "hf-prompt-lookup"), (2, "stock"), (2, "hf-prompt-lookup"),
    ]  # fmt: skip
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.json", "out.progress.jsonl", "questions.jsonl"]


def test_report_only_reports_the_questions_every_method_finished(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys
):
    out = tmp_path / "out.json"
    assert main(bench_argv(bench_model_dir, questions_file, out, "--limit", "2")) == 0
    progress = tmp_path / "out.progress.jsonl"
    lines = progress.read_text().splitlines()
    progress.write_text("\n".join(lines[:-1]) + "\n")  # interrupted: question 2 lacks its last method
    out.unlink()
    argv = [arg for arg in bench_argv(tmp_path / "absent-model", questions_file, out) if arg != "--no-progress"]
    assert main([*argv, "--limit", "2", "--report_only", "--markdown", str(tmp_path / "out.md")]) == 0
    report = json.loads(out.read_text())
    assert [(r["question_id"], r["method"]) for r in report["records"]] == [(1, "stock"), (1, "hf-prompt-lookup")]
    assert report["records"] == [json.loads(line) for line in lines[1:3]]  # as measured, nothing run again
    assert all(figures["questions"] == 1 for figures in report["summary"].values())
    assert report["settings"]["partial"].startswith("1 of 2 selected questions")
    assert "**Partial report** of an interrupted run: 1 of 2" in (tmp_path / "out.md").read_text()
    assert "(without the warm-up's compile seconds, which its progress file does not keep)" in (
        tmp_path / "out.md"
    ).read_text()
    assert progress.read_text().splitlines() == lines[:-1]  # the progress file is left as it was
    progress.write_text("\n".join(lines) + "\n")  # finished: a rebuilt report is not called partial
    assert main([*argv, "--limit", "2", "--report_only", "--markdown", str(tmp_path / "out.md")]) == 0
    assert "partial" not in json.loads(out.read_text())["settings"]
    assert "Report rebuilt from the finished run's `out.progress.jsonl`" in (tmp_path / "out.md").read_text()
    own = json.loads(out.read_text())
    del own["settings"]["rebuilt_from"]  # as the finished run wrote it: rebuilding must not overwrite it
    out.write_text(json.dumps(own))
    assert main([*argv, "--limit", "2", "--report_only"]) == 2
    assert "would overwrite" in capsys.readouterr().err and json.loads(out.read_text()) == own
    assert main([*argv, "--limit", "2", "--report_only", "--report_json", str(tmp_path / "rebuilt.json")]) == 0
    assert json.loads((tmp_path / "rebuilt.json").read_text())["settings"]["rebuilt_from"] == "out.progress.jsonl"

    (tmp_path / "other.jsonl").write_text(questions_file.read_text())  # the same questions, another file
    assert main([*argv, "--limit", "2", "--questions", str(tmp_path / "other.jsonl"), "--report_only"]) == 2
    assert "pass the run's --questions" in capsys.readouterr().err
    assert main([*argv, "--limit", "2", "--methods", "stock,hf-early-exit", "--report_only"]) == 2
    assert "no selected question has every method (stock, hf-early-exit) finished" in capsys.readouterr().err
    assert main([*argv[:-2], "--report_only"]) == 2
    assert "--report_only reads the progress file next to --json" in capsys.readouterr().err
    assert main([*argv[:-1], str(tmp_path / "never.json"), "--report_only"]) == 2
    assert "no progress file at" in capsys.readouterr().err


def test_unknown_method_fails_before_loading_the_model(tmp_path: Path, capsys):
    assert main(["--model", str(tmp_path / "absent"), "--methods", "stock,eagle9"]) == 2
    error = capsys.readouterr().err
    assert "unknown method(s) 'eagle9'" in error and "hf-prompt-lookup" in error


def test_usage_errors(tmp_path: Path, capsys):
    assert main(["--resume"]) == 2
    assert "--resume needs --json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--no-such-flag"])
    assert exit_info.value.code == 2


def test_a_cache_too_short_for_a_first_turn_is_refused_before_the_run(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys
):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hf_adaptive_spec.bench.conversation import turn_prompt_ids
    from hf_adaptive_spec.bench.fast_path import first_turn_slots
    from hf_adaptive_spec.bench.questions import load_questions
    from hf_adaptive_spec.generation.static_path import fast_path

    model, tokenizer = (
        AutoModelForCausalLM.from_pretrained(bench_model_dir),
        AutoTokenizer.from_pretrained(bench_model_dir),
    )
    questions = load_questions(questions_file, None, None, None)
    needs = {
        q.question_id: turn_prompt_ids(tokenizer, q.turns, []).shape[1] + 6 + fast_path(model).largest_bucket
        for q in questions
    }
    assert first_turn_slots(model, tokenizer, questions, 6) == needs
    longest = max(needs.values())
    options = MethodOptions(max_new_tokens=6, compile=True, max_cache_len=longest)
    _size_static_cache([model], tokenizer, questions, options)  # exactly enough is enough
    unset = MethodOptions(max_new_tokens=6, compile=True)
    _size_static_cache([model], tokenizer, questions, unset)
    assert unset.max_cache_len >= longest  # the default fits every first turn
    wider = AutoModelForCausalLM.from_pretrained(bench_model_dir)  # a +fp32 method's model, with a larger last bucket
    fast_path(wider, buckets=(8, fast_path(model).largest_bucket + 16))
    with pytest.raises(BenchError, match="cannot hold the first turn"):
        _size_static_cache([model, wider], tokenizer, questions, options)
    out = tmp_path / "out.json"
    argv = bench_argv(bench_model_dir, questions_file, out, "--max_cache_len", str(longest - 1))
    argv[argv.index("--methods") + 1] = "stock,stock-compiled"  # stock-compiled decodes in the run's cache
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert f"--max_cache_len {longest - 1} cannot hold the first turn of" in error
    assert f"pass --max_cache_len >= {longest}, or leave it unset" in error
    assert not out.exists() and not (tmp_path / "out.progress.jsonl").exists()  # refused before any method ran


def test_top_level_cli_dispatches_to_bench(capsys):
    assert top_level.main(["bench", "--methods", "nope"]) == 2
    assert "unknown method(s) 'nope'" in capsys.readouterr().err
    assert top_level.main([]) == 2
    assert "bench" in capsys.readouterr().err
    assert top_level.main(["--help"]) == 0


def test_python_dash_m_runs_the_command():
    """``python -m hf_adaptive_spec`` is the ``hf-adaptive-spec`` command (it said "No module named
    hf_adaptive_spec.__main__")."""
    done = subprocess.run([sys.executable, "-m", "hf_adaptive_spec", "bench", "--methods", "nope"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "unknown method(s) 'nope'" in done.stderr, done.stderr


def test_an_option_the_model_cannot_take_is_a_one_line_error(bench_model_dir: Path, questions_file: Path, capsys):
    argv = ["--model", str(bench_model_dir), "--questions", str(questions_file), "--methods", "hf-assistant"]
    assert main([*argv, "--drafter-layers", "5", "--no-progress"]) == 2
    assert "method 'hf-assistant': num_layers must be an int in 1..3" in capsys.readouterr().err


@pytest.mark.parametrize(("methods", "flag", "path"), [
    ("stock,eagle3", "--eagle3-checkpoint", "absent"),
    ("stock,eagle3-candidate", "--candidate-checkpoint", "absent"),
    ("stock,dvi", "--dvi-adapter", "absent"),
    ("stock,eagle3-candidate-policy", "--candidate-policy", "drafter"),  # the drafter's folder: no policy
])  # fmt: skip
def test_a_drafter_policy_or_adapter_that_cannot_be_loaded_is_a_one_line_error(
        bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys, methods, flag, path):
    """A mistyped path (MissingArtifactFileError) or one of another artifact (ArtifactTypeError) was a raw traceback,
    where the README promises a one-line error naming the method."""
    from transformers import AutoModelForCausalLM

    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel

    Eagle3DraftModel.from_target(AutoModelForCausalLM.from_pretrained(bench_model_dir)).save_pretrained(
        tmp_path / "drafter")
    drafter = ["--eagle3-checkpoint", str(tmp_path / "drafter")] if "policy" in methods else []
    argv = [*bench_argv(bench_model_dir, questions_file, tmp_path / "run.json", "--limit", "1"), "--methods", methods,
            *drafter, flag, str(tmp_path / path)]
    assert main(argv) == 2
    error = capsys.readouterr().err.splitlines()[-1]  # after the weights' loading bar
    assert error.startswith(f"hf-adaptive-spec bench: error: method '{methods.split(',')[1]}': "), error
    assert str(tmp_path / path) in error and not (tmp_path / "run.json").exists()


def test_the_table_is_printed_before_the_files_are_written(bench_model_dir: Path, questions_file: Path,
                                                           tmp_path: Path, capsys, monkeypatch):
    """A file that cannot be written after all (a full disk) was a raw OSError, and the table, printed last, was
    lost with the run's results."""
    from hf_adaptive_spec.bench import cli

    def disk_full(report, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli, "write_markdown", disk_full)
    argv = [*bench_argv(bench_model_dir, questions_file, tmp_path / "run.json", "--limit", "1"), "--markdown",
            str(tmp_path / "run.md")]
    assert main(argv) == 2
    printed = capsys.readouterr()
    assert "| hf-prompt-lookup | 1 |" in printed.out
    assert f"cannot write {tmp_path / 'run.md'} ([Errno 28] No space left on device)" in printed.err
    assert json.loads((tmp_path / "run.json").read_text())["summary"]["hf-prompt-lookup"]["questions"] == 1


def test_a_run_again_without_resume_keeps_an_interrupted_runs_records(bench_model_dir: Path, questions_file: Path,
                                                                     tmp_path: Path, capsys):
    """The same command without --resume rewrote the progress file of an interrupted run, its records gone without a
    word. A finished run, whose report holds every record, is measured afresh as before."""
    out = tmp_path / "out.json"
    progress = tmp_path / "out.progress.jsonl"
    argv = bench_argv(bench_model_dir, questions_file, out, "--limit", "1")
    assert main(argv) == 0
    measured = progress.read_text()
    assert main(argv) == 0  # finished: its report holds every record
    assert progress.read_text() != measured
    measured = progress.read_text()
    out.unlink()  # interrupted before its report
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert f"{progress} holds 2 measured (question, method) pair(s) that no report at {out} holds" in error
    assert "Pass --resume to continue that run" in error and progress.read_text() == measured
    assert main([*argv, "--limit", "2", "--resume"]) == 0
    assert len(json.loads(out.read_text())["records"]) == 4


def test_a_learned_policy_method_on_another_model_needs_its_policy_passed(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys
):
    """The audit's run: --model and a drafter of one's own with eagle3-radar loaded the policy shipped for SmolLM2;
    it is refused, naming the option, and a policy passed with it runs."""
    import torch
    from transformers import AutoModelForCausalLM

    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
    from hf_adaptive_spec.policies import RadarPolicy

    torch.manual_seed(0)
    Eagle3DraftModel.from_target(
        AutoModelForCausalLM.from_pretrained(bench_model_dir)
    ).save_pretrained(tmp_path / "drafter")
    argv = [*bench_argv(bench_model_dir, questions_file, tmp_path / "run.json", "--limit", "1"),
            "--methods", "stock,eagle3-radar", "--eagle3-checkpoint", str(tmp_path / "drafter")]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "eagle3-radar: the shipped policies were trained for HuggingFaceTB/SmolLM2-135M-Instruct" in error
    assert "Pass --radar-policy PATH" in error and not (tmp_path / "run.json").exists()
    RadarPolicy(depth=2, top_k=2, total_tokens=4).save_pretrained(tmp_path / "radar")
    assert main([*argv, "--radar-policy", str(tmp_path / "radar")]) == 0


def _stock_outputs(report: dict) -> dict:
    return {
        r["question_id"]: [t["output_ids"] for t in r["turns"]] for r in report["records"] if r["method"] == "stock"
    }


def test_sampling_run_skips_the_identity_check_and_seeds_every_turn(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path
):
    everything, math_only = tmp_path / "all.json", tmp_path / "math.json"
    assert main([*bench_argv(bench_model_dir, questions_file, everything, "--temperature", "1.0"),
                 "--markdown", str(tmp_path / "all.md")]) == 0  # fmt: skip
    report = json.loads(everything.read_text())
    assert report["settings"]["options"]["temperature"] == 1.0
    for figures in report["summary"].values():
        assert figures["identical"] is None and figures["mismatched_turns"] == 0 and figures["speedup"] > 0
    assert all(t["identical"] is None for r in report["records"] for t in r["turns"])
    markdown = (tmp_path / "all.md").read_text()
    assert "sampling at temperature 1 (identity not checked)" in markdown and "**no**" not in markdown
    # question 2's turns start from the same seeds whether or not question 1 ran before them
    assert main(bench_argv(bench_model_dir, questions_file, math_only, "--temperature", "1.0",
                           "--categories", "math")) == 0
    assert _stock_outputs(json.loads(math_only.read_text()))[2] == _stock_outputs(report)[2]


def test_a_sampled_run_records_its_sampling_and_a_file_without_it_does_not_resume(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys
):
    """Progress files sampled before every truncating warper was turned off (top-k and top-p only: a
    generation_config's min_p still truncated) hold no sampling record, and are not mixed with a new run's records."""
    out = tmp_path / "run.json"
    argv = [*bench_argv(bench_model_dir, questions_file, out, "--temperature", "0.7", "--limit", "1"), "--resume"]
    assert main(argv) == 0
    assert json.loads(out.read_text())["settings"]["sampling"] == sampling_kwargs(0.7)
    progress = tmp_path / "run.progress.jsonl"
    header, *records = progress.read_text().splitlines(keepends=True)
    settings = json.loads(header)["settings"]
    assert settings.pop("sampling") == {**sampling_kwargs(0.7)}
    progress.write_text(json.dumps({"settings": settings}) + "\n" + "".join(records))
    assert main(argv) == 2
    assert "sampling: None -> {" in capsys.readouterr().err


def test_negative_temperature_is_a_one_line_error(bench_model_dir: Path, questions_file: Path, capsys):
    assert main(["--model", str(bench_model_dir), "--questions", str(questions_file), "--temperature", "-1"]) == 2
    assert "--temperature must be 0 (greedy) or a finite positive number" in capsys.readouterr().err


def test_compiled_bfloat16_run_reports_the_fast_path_figures(bench_model_dir: Path, questions_file: Path,
                                                             tmp_path: Path):
    """stock-compiled and --compile share one StaticCache and compile configuration; speedups are
    relative to --reference, with speedup_vs_stock kept; below float32 every method's agreement with
    the float32 stock answer is reported; compile time is counted apart from the timed turns."""
    out = tmp_path / "out.json"
    argv = bench_argv(bench_model_dir, questions_file, out, "--limit", "2", "--dtype", "bfloat16", "--compile",
                      "--reference", "stock-compiled", "--warmup", "2")  # fmt: skip
    argv[argv.index("--methods") + 1] = "stock,stock-compiled,plain-steps+lookup"
    assert main(argv) == 0
    report = json.loads(out.read_text())
    summary = report["summary"]
    assert report["settings"]["reference"] == "stock-compiled" and "compile" in report["settings"]["timing"]
    assert summary["stock-compiled"]["speedup"] == pytest.approx(1.0)
    assert summary["stock"]["speedup_vs_stock"] == pytest.approx(1.0)
    assert summary["stock"]["speedup"] == pytest.approx(1.0 / summary["stock-compiled"]["speedup_vs_stock"])
    for figures in summary.values():
        assert 0.0 <= figures["fp32_agreement"] <= 1.0 and 0.0 <= figures["fp32_identical_share"] <= 1.0
        assert figures["reference"] == "stock-compiled"
    assert summary["stock-compiled"]["compile_seconds"] > 0 and summary["plain-steps+lookup"]["compile_seconds"] > 0
    assert summary["stock"]["compile_seconds"] is None  # eager: its first warm-up call's extra time is no compile
    engine_turns = [t for r in report["records"] if r["method"] == "plain-steps+lookup" for t in r["turns"]]
    assert all(t["compile_time"] is not None for t in engine_turns)
    stock_turns = [t for r in report["records"] if r["method"] == "stock" for t in r["turns"]]
    assert all(len(t["fp32_reference_ids"]) > 0 and t["fp32_reference_seconds"] > 0 for t in stock_turns)
    # the float32 answers, timed beside stock, are the peer "eager float32 stock"
    fp32_tokens = sum(len(t["fp32_reference_ids"]) for t in stock_turns)
    fp32_seconds = sum(t["fp32_reference_seconds"] for t in stock_turns)
    assert summary["stock-fp32"]["throughput"] == pytest.approx(fp32_tokens / fp32_seconds)
    assert summary["stock-fp32"]["speedup"] == pytest.approx(
        summary["stock-fp32"]["throughput"] / summary["stock-compiled"]["throughput"]
    )


def test_a_float32_method_in_a_bfloat16_run_decodes_with_the_float32_model(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys
):
    """``<method>+fp32`` runs on the float32 copy of the model: its greedy answers are the float32 stock answers
    (agreement 1 on every turn), while the same method in bfloat16 runs beside it; its passes are not counted on
    the bfloat16 model's hook. In a float32 run the suffix is refused, naming the fix."""
    out = tmp_path / "out.json"
    argv = bench_argv(bench_model_dir, questions_file, out, "--limit", "2", "--dtype", "bfloat16")
    argv[argv.index("--methods") + 1] = "stock,plain-steps+lookup,plain-steps+lookup+fp32"
    assert main(argv) == 0
    report = json.loads(out.read_text())
    turns = {
        name: [t for r in report["records"] if r["method"] == name for t in r["turns"]] for name in report["summary"]
    }
    in_float32 = turns["plain-steps+lookup+fp32"]
    assert in_float32 and all(t["fp32_identical"] for t in in_float32)
    assert all(t["target_passes"] is None for t in in_float32)
    assert all(t["target_passes"] for t in turns["plain-steps+lookup"])
    assert report["summary"]["plain-steps+lookup+fp32"]["fp32_agreement"] == pytest.approx(1.0)
    float32_argv = bench_argv(bench_model_dir, questions_file, tmp_path / "f.json", "--limit", "1")
    float32_argv[float32_argv.index("--methods") + 1] = "stock,plain-steps+lookup+fp32"
    assert main(float32_argv) == 2
    assert "this run is float32 already: drop +fp32" in capsys.readouterr().err


def test_no_fp32_agreement_skips_the_float32_answers_and_a_resume_must_match(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys
):
    out = tmp_path / "out.json"
    argv = bench_argv(bench_model_dir, questions_file, out, "--limit", "1", "--dtype", "bfloat16")
    assert main([*argv, "--no_fp32_agreement"]) == 0
    report = json.loads(out.read_text())
    assert report["settings"]["fp32_agreement"] is False
    assert all(figures["fp32_agreement"] is None for figures in report["summary"].values())
    assert all(not t["fp32_reference_ids"] for r in report["records"] for t in r["turns"])
    assert "stock-fp32" not in report["summary"]
    assert main([*argv, "--resume"]) == 2  # stock's records hold no float32 answers to agree with
    assert "was written with other settings (fp32_agreement: False -> None)" in capsys.readouterr().err


def test_float32_stock_as_a_method_is_refused_where_the_agreement_already_times_it(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys
):
    """Below float32 the agreement decodes and times eager float32 stock beside stock (row ``stock-fp32``):
    ``stock+fp32`` would do it again per turn; refused before loading, naming both fixes. Without the agreement
    it is the one float32 stock row."""
    out = tmp_path / "out.json"
    argv = bench_argv(bench_model_dir, questions_file, out, "--limit", "1", "--dtype", "bfloat16")
    argv[argv.index("--methods") + 1] = "stock,stock+fp32"
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "stock+fp32 decodes what the float32 agreement already decodes and times (its row stock-fp32" in error
    assert "drop stock+fp32, or pass --no_fp32_agreement" in error
    assert main([*argv, "--no_fp32_agreement"]) == 0
    summary = json.loads(out.read_text())["summary"]
    assert "stock+fp32" in summary and "stock-fp32" not in summary


def test_keep_outputs_keeps_every_methods_tokens(bench_model_dir: Path, questions_file: Path, tmp_path: Path):
    def outputs(*extra: str) -> dict[str, list]:
        out = tmp_path / f"out{len(extra)}.json"
        assert main(bench_argv(bench_model_dir, questions_file, out, "--limit", "1", *extra)) == 0
        return {r["method"]: [t["output_ids"] for t in r["turns"]] for r in json.loads(out.read_text())["records"]}

    kept = outputs("--keep_outputs")
    assert kept["hf-prompt-lookup"] == kept["stock"] and all(kept["stock"])  # greedy: the same tokens
    default = outputs()
    assert default["stock"] == kept["stock"] and default["hf-prompt-lookup"] == [None] * len(kept["stock"])


def test_reference_must_be_a_method_that_runs(bench_model_dir: Path, questions_file: Path, capsys):
    argv = ["--model", str(bench_model_dir), "--questions", str(questions_file), "--reference", "stock-compiled"]
    assert main([*argv, "--no-progress"]) == 2
    assert "--reference 'stock-compiled' is not among the methods run" in capsys.readouterr().err


def test_tree_profile_sets_the_static_tree_the_profile_recommends(bench_model_dir: Path, questions_file: Path,
                                                                  tmp_path: Path, capsys, monkeypatch):
    from hf_adaptive_spec.profiling import HardwareProfile

    tree = {"depth": 3, "top_k": 2, "total_tokens": 6, "tau": 2.0, "tokens_per_second": 10.0}
    profile = tmp_path / "profile.json"
    HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0],
                    recommendation={"tree": tree, "policy": None}).save(profile)
    out = tmp_path / "out.json"
    argv = [*bench_argv(bench_model_dir, questions_file, out, "--limit", "1"),
            "--methods", "stock,tree", "--drafter-layers", "2"]
    assert main([*argv, "--tree_profile", str(profile)]) == 0
    options = json.loads(out.read_text())["settings"]["options"]
    assert (options["tree_depth"], options["tree_top_k"], options["tree_total_tokens"]) == (3, 2, 6)
    HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0]).save(profile)
    assert main([*argv, "--tree_profile", str(profile)]) == 2
    assert "--tree_profile: The hardware profile" in capsys.readouterr().err
    _a_compiled_run_takes_the_profiles_buckets(argv, profile, tree, monkeypatch)
    for timed in ({"model": "org/another-model"},
                  {"model": str(bench_model_dir.resolve()), "drafter": "early exit: 8 layers"}):
        HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0], recommendation={"tree": tree},
                        **timed).save(profile)
        assert main([*argv, "--tree_profile", str(profile)]) == 2  # another target's or drafter's tree
        assert "--tree_profile: The hardware profile" in capsys.readouterr().err


@pytest.mark.parametrize(("measured", "named"), [
    ({"dtype": "bfloat16"}, "in bfloat16 on the eager path, and this run is on cpu in float32"),
    ({"path": "compiled", "buckets": [1, 8]}, "on the compiled static-cache path (--compile), and this run"),
    ({"device": "cuda:0"}, "measured on cuda in float32"),
])
def test_tree_profile_of_another_cost_curve_is_refused(bench_model_dir: Path, questions_file: Path, tmp_path: Path,
                                                       capsys, measured, named):
    """A profile measured in another dtype, on another path or device type ranked its trees on another cost curve:
    the run took its tree and reported it as this run's best (only the target and drafter were compared)."""
    from hf_adaptive_spec.profiling import HardwareProfile

    tree = {"depth": 3, "top_k": 2, "total_tokens": 6, "tau": 2.0, "tokens_per_second": 10.0}
    profile = tmp_path / "profile.json"
    HardwareProfile(**{"device": "cpu", "dtype": "float32", "num_threads": 1, "context_length": 64,
                       "verify_tokens": [1, 8], "verify_seconds": [1.0, 1.0], **measured},
                    recommendation={"tree": tree, "policy": None}).save(profile)
    argv = [*bench_argv(bench_model_dir, questions_file, tmp_path / "out.json", "--limit", "1"),
            "--methods", "stock,tree", "--drafter-layers", "2", "--tree_profile", str(profile)]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "its tree was ranked on another cost curve" in error and named in error


def test_tree_profile_of_the_lookup_branch_alone_sets_the_branch_and_refuses_a_method_without_it(
        bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys):
    """A profile whose winner is the prompt-lookup branch alone (depth 0) gives ``+lookup`` its branch length unless
    --lookup_tokens says otherwise; a tree method without ``+lookup`` would run plain steps under its name: refused."""
    from hf_adaptive_spec.profiling import HardwareProfile

    alone = {"depth": 0, "top_k": 2, "total_tokens": 1, "tau": 1.3, "tokens_per_second": 10.0, "lookup_tokens": 2}
    profile = tmp_path / "profile.json"
    HardwareProfile("cpu", "float32", 1, 64, [1, 8], [1.0, 1.0],
                    recommendation={"tree": alone, "policy": None, "lookup_tokens": 2}).save(profile)
    out = tmp_path / "out.json"
    argv = [*bench_argv(bench_model_dir, questions_file, out, "--limit", "1"), "--drafter-layers", "2",
            "--tree_profile", str(profile)]
    assert main([*argv, "--methods", "stock,tree+lookup"]) == 0
    options = json.loads(out.read_text())["settings"]["options"]
    assert (options["tree_depth"], options["lookup_tokens"]) == (0, 2)
    assert main([*argv, "--methods", "stock,tree+lookup", "--lookup_tokens", "3"]) == 0
    assert json.loads(out.read_text())["settings"]["options"]["lookup_tokens"] == 3
    assert main([*argv, "--methods", "stock,tree,tree@2/2/4"]) == 2
    assert ("tree: the tree of --tree_profile's recommendation (depth 0, top-k 2, 1 tokens, root included) drafts "
            "nothing, so tree would run plain one-token steps" in capsys.readouterr().err)
    assert main([*bench_argv(bench_model_dir, questions_file, out, "--limit", "1"), "--methods", "stock,tree+lookup",
                 "--drafter-layers", "2"]) == 0  # no profile: the default branch
    assert json.loads(out.read_text())["settings"]["options"]["lookup_tokens"] == 4


@pytest.mark.parametrize(
    ("methods", "flags", "named"),
    [
        ("stock,tree", ["--tree-depth", "0"], "the tree of --tree-depth/--tree-top-k/--tree-total-tokens (depth 0"),
        ("stock,tree", ["--tree_total_tokens", "1"], "(depth 2, top-k 4, 1 tokens"),
        ("stock,tree@0/4/8", [], "tree@0/4/8: the tree of its @D/K/N (depth 0, top-k 4, 8 tokens"),
        ("stock,tree@2/0/8+lookup", [], "tree@2/0/8+lookup: the tree of its @D/K/N (depth 2, top-k 0"),
    ],
)
def test_a_static_tree_that_drafts_nothing_is_refused_before_anything_runs(
        bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys, methods, flags, named):
    """Such a tree ran plain one-token steps under the tree method's name (tau 1.0, found by a review); only +lookup
    may draft nothing, verifying the branch alone (test above)."""
    out = tmp_path / "out.json"
    argv = [*bench_argv(bench_model_dir, questions_file, out, "--limit", "1"), "--drafter-layers", "2"]
    assert main([*argv, "--methods", methods, *flags]) == 2
    error = capsys.readouterr().err
    assert named in error and "drafts nothing" in error and not out.exists()


def test_a_rebuilt_report_names_the_machine_that_measured_the_run(bench_model_dir: Path, questions_file: Path,
                                                                   tmp_path: Path):
    """--report_only on another machine named the rebuilding processor in the markdown and environment, beside the
    measuring one in its settings (found by a review)."""
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    assert main([*bench_argv(bench_model_dir, questions_file, out, "--limit", "1"), "--markdown", str(md)]) == 0
    progress = tmp_path / "out.progress.jsonl"
    header, *records = progress.read_text().splitlines()
    stored = json.loads(header)
    stored["settings"]["machine"] = {**stored["settings"]["machine"], "device": "AMD EPYC 9999", "instruction_set": "X"}
    stored["settings"]["num_threads"] = 7
    progress.write_text("\n".join([json.dumps(stored), *records]) + "\n")
    rebuilt = tmp_path / "rebuilt.json"
    argv = [*bench_argv(tmp_path / "absent-model", questions_file, out, "--limit", "1"), "--report_only",
            "--report_json", str(rebuilt), "--markdown", str(md)]
    assert main(argv) == 0
    environment = json.loads(rebuilt.read_text())["environment"]
    assert (environment["device"], environment["instruction_set"], environment["num_threads"]) == (
        "AMD EPYC 9999", "X", 7
    )
    assert "on AMD EPYC 9999 (X)," in md.read_text()
    # a run measured on a GPU records no instruction set: the rebuilding CPU's is not shown beside the GPU's name
    stored["settings"]["machine"] = {"device": "NVIDIA H100", "torch": "2.13.0", "transformers": "5.23.0"}
    progress.write_text("\n".join([json.dumps(stored), *records]) + "\n")
    assert main(argv) == 0
    assert "instruction_set" not in json.loads(rebuilt.read_text())["environment"]
    assert "on NVIDIA H100," in md.read_text()


def _a_compiled_run_takes_the_profiles_buckets(argv, profile, tree, monkeypatch):
    """A compiled run verifies in the buckets the profile ranked its tree on (``profile --buckets``), unless
    --verify_buckets says otherwise; an eager run has no buckets to set."""
    from hf_adaptive_spec.bench import cli
    from hf_adaptive_spec.profiling import HardwareProfile

    calls, real = [], cli.fast_path
    monkeypatch.setattr(cli, "fast_path", lambda model, buckets: calls.append(buckets) or real(model, buckets=buckets))
    HardwareProfile("cpu", "float32", 1, 64, [1, 2, 4], [1.0, 1.0, 1.0], path="compiled", buckets=[2, 4],
                    recommendation={"tree": {**tree, "total_tokens": 4}, "policy": None}).save(profile)
    out = Path(argv[argv.index("--json") + 1])
    compiled = [*argv, "--tree_profile", str(profile), "--compile", "--warmup", "1"]
    assert main(compiled) == 0 and calls == [(2, 4)]
    assert json.loads(out.read_text())["settings"]["options"]["verify_buckets"] == "2,4"
    assert main([*compiled, "--verify_buckets", "3,8"]) == 0 and calls[-1] == (3, 8)


def test_fp32_verify_buckets_set_the_float32_copys_buckets(bench_model_dir: Path, questions_file: Path, tmp_path: Path,
                                                           monkeypatch, capsys):
    """A +fp32 method decodes with the float32 copy: --fp32_verify_buckets sets that model's buckets (a float32
    profile's, for its tree), --verify_buckets the run's model's (the run stops once its models are loaded)."""
    from hf_adaptive_spec.bench import cli

    calls, real = [], cli.fast_path
    monkeypatch.setattr(cli, "fast_path", lambda model, buckets: calls.append((model.dtype, buckets))
                        or real(model, buckets=buckets))

    def stop(*args, **kwargs):
        raise BenchError("models loaded")

    monkeypatch.setattr(cli, "_size_static_cache", stop)
    argv = bench_argv(bench_model_dir, questions_file, tmp_path / "out.json", "--dtype", "bfloat16", "--compile",
                      "--fp32_verify_buckets", "3,8", "--drafter-layers", "2")
    argv[argv.index("--methods") + 1] = "stock,tree,tree+fp32"
    assert main(argv) == 2 and "models loaded" in capsys.readouterr().err
    assert calls == [(torch.float32, (3, 8))]
    assert main([*argv, "--verify_buckets", "2,5"]) == 2
    assert calls[1:] == [(torch.bfloat16, (2, 5)), (torch.float32, (3, 8))]

def test_a_sampled_bfloat16_run_measures_no_float32_agreement(bench_model_dir: Path, questions_file: Path,
                                                              tmp_path: Path):
    """A sampled float32 answer is one draw of the distribution: no method's draw is meant to equal it."""
    out = tmp_path / "out.json"
    assert main(bench_argv(bench_model_dir, questions_file, out, "--limit", "1", "--dtype", "bfloat16",
                           "--temperature", "1.0")) == 0  # fmt: skip
    report = json.loads(out.read_text())
    assert report["settings"]["fp32_agreement"] is False
    assert all(figures["fp32_agreement"] is None for figures in report["summary"].values())


@pytest.mark.parametrize("extra, message", [
    (("--compile",), "--compile moves this package's methods to the compiled fast path, and none is selected"),
    (("--max_cache_len", "256"),
     "--max_cache_len sizes the fast path's StaticCache, and no selected method decodes there"),
    (("--methods", "stock,stock-compiled", "--warmup", "0"), "--warmup 0 would time the compile of stock-compiled"),
    (("--verify_buckets", "2,4"),
     "--verify_buckets sets the verification sizes of this package's methods on the compiled"),
    (("--methods", "stock,tree", "--compile", "--verify_buckets", "1,4"), "give sizes >= 2, e.g. 2,3,4,8"),
])
def test_fast_path_options_nothing_would_use_are_refused(bench_model_dir: Path, questions_file: Path, tmp_path: Path,
                                                         capsys, extra, message):
    assert main(bench_argv(bench_model_dir, questions_file, tmp_path / "out.json", *extra)) == 2
    assert message in capsys.readouterr().err


def test_a_resume_keeps_the_warm_up_and_machine_of_the_run(bench_model_dir: Path, questions_file: Path, tmp_path: Path,
                                                           capsys):
    out = tmp_path / "out.json"
    argv = bench_argv(bench_model_dir, questions_file, out, "--limit", "1")
    assert main(argv) == 0
    settings = json.loads(out.read_text())["settings"]
    assert settings["warmup"] == 1
    assert set(settings["machine"]) == {"device", "instruction_set", "torch", "transformers"}
    assert main([*argv, "--resume", "--warmup", "3"]) == 2
    assert "other settings (warmup: 1 -> 3)" in capsys.readouterr().err


def test_a_resume_with_nothing_left_to_run_says_its_report_is_rebuilt(bench_model_dir: Path, questions_file: Path,
                                                                     tmp_path: Path):
    """Every pair finished: the resumed run ran no warm-up, so a compiled method's compile seconds went missing (shown
    as unmeasured) from a report that overwrote the finished run's as if measured afresh."""
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    argv = bench_argv(bench_model_dir, questions_file, out, "--per-category", "1", "--markdown", str(md))
    assert main(argv) == 0
    settings = json.loads(out.read_text())["settings"]
    assert "rebuilt_from" not in settings and settings["per_category"] == 1  # the selection, all of it
    own = out.read_text()
    assert main([*argv, "--resume"]) == 2  # the finished run's own report, with its compile seconds: kept
    assert out.read_text() == own
    rebuilt = tmp_path / "rebuilt.json"
    assert main([*argv, "--resume", "--report_json", str(rebuilt)]) == 0
    assert json.loads(rebuilt.read_text())["settings"]["rebuilt_from"] == "out.progress.jsonl"
    assert "Report rebuilt from the finished run's `out.progress.jsonl` (without the warm-up's" in md.read_text()
    assert main([*argv, "--report_only", "--report_json", str(rebuilt)]) == 0  # marked rebuilt, it may be rebuilt over
    assert json.loads(rebuilt.read_text())["settings"]["per_category"] == 1
    assert main([*argv, "--report_json", str(rebuilt)]) == 2  # a run that measures writes --json: refused, not ignored


@pytest.mark.parametrize("other", ["{not json", "[1, 2]", '{"device": "cpu"}'])
def test_a_rebuilt_report_does_not_overwrite_another_file_at_json(bench_model_dir: Path, questions_file: Path,
                                                                   tmp_path: Path, capsys, other: str):
    """A file of another kind at --json failed --report_only raw (JSONDecodeError, AttributeError of a list) or was
    overwritten (a JSON object without 'settings')."""
    out = tmp_path / "out.json"
    argv = bench_argv(bench_model_dir, questions_file, out, "--limit", "1")
    assert main(argv) == 0
    out.write_text(other)
    assert main([*argv, "--report_only"]) == 2
    assert f"--report_only would overwrite {out}, which is no bench report: pass --report_json PATH" in (
        capsys.readouterr().err)
    assert out.read_text() == other


def test_a_resume_refuses_a_question_file_edited_since(bench_model_dir: Path, questions_file: Path, tmp_path: Path,
                                                       capsys):
    """The same path with other questions: resumed methods answered new prompts, checked against and fed stock's
    answers to the old ones (a lossless method reported as mismatched; found by a review)."""
    questions = tmp_path / "questions.jsonl"
    questions.write_text(questions_file.read_text())
    out = tmp_path / "out.json"
    argv = bench_argv(bench_model_dir, questions, out, "--limit", "1")
    assert main(argv) == 0
    assert main([*argv, "--resume", "--report_json", str(tmp_path / "rebuilt.json")]) == 0  # unchanged: resumes
    first, *rest = questions.read_text().splitlines()
    edited = json.loads(first)
    edited["turns"][0] += " And one more thing."
    questions.write_text("\n".join([json.dumps(edited), *rest]) + "\n")
    assert main([*argv, "--resume"]) == 2
    assert "other settings (questions_digest: " in capsys.readouterr().err
    assert main([*argv, "--report_only", "--report_json", str(tmp_path / "rebuilt.json")]) == 2
    assert "holds other questions than when" in capsys.readouterr().err


def test_a_resumed_fast_path_run_keeps_its_cache_length_when_none_is_given(tmp_path: Path):
    from hf_adaptive_spec.bench.arguments import BenchArguments
    from hf_adaptive_spec.bench.cli import _stored_cache_length
    from hf_adaptive_spec.bench.progress import ProgressLog

    args = BenchArguments(questions=tmp_path / "q.jsonl", json=tmp_path / "out.json", resume=True)
    assert _stored_cache_length(args) is None  # nothing to resume: sized to the questions
    ProgressLog(tmp_path / "out.progress.jsonl", {"options": {"max_cache_len": 300}}, resume=False)
    assert _stored_cache_length(args) == 300


def test_a_resumed_run_names_the_methods_whose_learning_restarted(bench_model_dir: Path, questions_file: Path,
                                                                  tmp_path: Path):
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    argv = bench_argv(bench_model_dir, questions_file, out, "--markdown", str(md), "--drafter-layers", "2")
    argv[argv.index("--methods") + 1] = "stock,hf-assistant"
    adaptive = ["--num_assistant_tokens_schedule", "heuristic"]  # transformers keeps the adapted length across calls
    assert main([*argv, *adaptive, "--limit", "1"]) == 0
    assert "restarted_learning" not in json.loads(out.read_text())["settings"]
    assert main([*argv, *adaptive, "--limit", "2", "--resume"]) == 0
    assert json.loads(out.read_text())["settings"]["restarted_learning"] == {"hf-assistant": [1]}
    assert "started afresh when the run resumed: `hf-assistant` after 1 questions" in md.read_text()
    assert main([*argv, *adaptive, "--limit", "3", "--resume"]) == 0  # every restart is named
    assert json.loads(out.read_text())["settings"]["restarted_learning"] == {"hf-assistant": [1, 2]}
    rebuilt = tmp_path / "rebuilt.json"  # the rebuilt report says it too: the progress file keeps the note
    assert main([*argv, *adaptive, "--limit", "3", "--report_only", "--report_json", str(rebuilt)]) == 0
    assert json.loads(rebuilt.read_text())["settings"]["restarted_learning"] == {"hf-assistant": [1, 2]}
    assert "`hf-assistant` after 1 and 2 questions" in md.read_text()
    constant = tmp_path / "constant.json"
    argv[argv.index("--json") + 1] = str(constant)
    assert main([*argv, "--limit", "1"]) == 0 and main([*argv, "--limit", "2", "--resume"]) == 0
    assert "restarted_learning" not in json.loads(constant.read_text())["settings"]  # a constant length learns nothing


def test_a_method_added_when_resuming_is_reported_as_not_interleaved_with_the_reference(
    bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys
):
    """A method added by --resume was measured after every stock turn, in another session of the machine, and the
    report compared them as if interleaved, silently. Each record names its session; the report counts the questions
    a method shares no session with the reference on, and the markdown says so."""
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    argv = bench_argv(bench_model_dir, questions_file, out, "--markdown", str(md), "--limit", "2")
    argv[argv.index("--methods") + 1] = "stock"
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert "not_interleaved" not in report and len(report["settings"]["sessions"]) == 1
    assert {record["session"] for record in report["records"]} == {0}
    argv[argv.index("--methods") + 1] = "stock,hf-prompt-lookup"
    assert main([*argv, "--resume"]) == 0
    report = json.loads(out.read_text())
    assert report["not_interleaved"] == {"hf-prompt-lookup": 2} and len(report["settings"]["sessions"]) == 2
    assert {(r["method"], r["session"]) for r in report["records"]} == {("stock", 0), ("hf-prompt-lookup", 1)}
    assert "**Not interleaved:** a resumed run measured these methods in another session than `stock` on some " \
           "questions: `hf-prompt-lookup` on 2;" in md.read_text()
    rebuilt = tmp_path / "rebuilt.json"  # rebuilt from the progress file, it says so too
    assert main([*argv, "--report_only", "--report_json", str(rebuilt)]) == 0
    assert json.loads(rebuilt.read_text())["not_interleaved"] == {"hf-prompt-lookup": 2}
    capsys.readouterr()
    assert paired_main([str(out), "--base", "stock"]) == 0
    assert capsys.readouterr().out.endswith("not interleaved with stock (measured in another session of a resumed "
                                            "run, their ratio compares two sessions of the machine): "
                                            "hf-prompt-lookup on 2 questions\n")


def test_a_resume_refuses_a_drafter_or_policy_retrained_at_its_path(bench_model_dir: Path, questions_file: Path,
                                                                    tmp_path: Path, capsys):
    """The paths were all the progress file named: a policy or drafter retrained at the same folder resumed, and the
    report mixed two policies' records under one name."""
    import torch
    from transformers import AutoModelForCausalLM

    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
    from hf_adaptive_spec.policies import LTDPolicy

    def save_drafter(seed: int) -> None:
        torch.manual_seed(seed)
        Eagle3DraftModel.from_target(AutoModelForCausalLM.from_pretrained(bench_model_dir)).save_pretrained(drafter)

    def save_policy(seed: int) -> None:
        torch.manual_seed(seed)
        LTDPolicy(depth=2, top_k=2, total_tokens=4).save_pretrained(policy)

    drafter, policy = tmp_path / "drafter", tmp_path / "policy"
    save_drafter(0)
    save_policy(0)
    argv = [*bench_argv(bench_model_dir, questions_file, tmp_path / "run.json"),
            "--eagle3-checkpoint", str(drafter), "--candidate-policy", str(policy)]
    argv[argv.index("--methods") + 1] = "stock,eagle3-candidate-policy"
    assert main([*argv, "--limit", "1"]) == 0
    save_policy(1)  # retrained at the same path
    assert main([*argv, "--limit", "2", "--resume"]) == 2
    error = capsys.readouterr().err
    assert ("eagle3-candidate-policy's policy changed in model.safetensors, not in config.json "
            "(loaded.methods.eagle3-candidate-policy.policy: ") in error
    assert "A model, drafter or policy was retrained, edited or replaced at its path since the run began" in error
    save_policy(0)  # restored: resumes
    assert main([*argv, "--limit", "2", "--resume"]) == 0
    with_eagle3 = list(argv)
    with_eagle3[argv.index("--methods") + 1] = "stock,eagle3-candidate-policy,eagle3"
    assert main([*with_eagle3, "--limit", "2", "--resume"]) == 0  # a method new to the run adds its digests
    header = json.loads((tmp_path / "run.progress.jsonl").read_text().splitlines()[0])["settings"]
    assert set(header["loaded"]["methods"]) == {"stock", "eagle3-candidate-policy", "eagle3"}
    save_drafter(1)
    assert main([*with_eagle3, "--limit", "3", "--resume"]) == 2
    error = capsys.readouterr().err
    assert "loaded.methods.eagle3-candidate-policy.drafter: " in error and "loaded.methods.eagle3.drafter: " in error


def test_a_resume_refused_for_a_policy_config_edit_says_it_was_no_retrain(bench_model_dir: Path,
                                                                            questions_file: Path, tmp_path: Path,
                                                                            capsys):
    """Policy folders whose config.json alone was edited (a lookup-branch setting added) were refused as 'retrained
    or replaced at its path': the refusal names config.json as the file that changed, not the weights."""
    import torch
    from transformers import AutoModelForCausalLM

    from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
    from hf_adaptive_spec.policies import LTDPolicy

    drafter, policy = tmp_path / "drafter", tmp_path / "policy"
    torch.manual_seed(0)
    Eagle3DraftModel.from_target(AutoModelForCausalLM.from_pretrained(bench_model_dir)).save_pretrained(drafter)
    LTDPolicy(depth=2, top_k=2, total_tokens=4).save_pretrained(policy)
    argv = [*bench_argv(bench_model_dir, questions_file, tmp_path / "run.json"),
            "--eagle3-checkpoint", str(drafter), "--candidate-policy", str(policy)]
    argv[argv.index("--methods") + 1] = "stock,eagle3-candidate-policy"
    assert main([*argv, "--limit", "1"]) == 0
    config = policy / "config.json"
    measured_with = config.read_text()
    config.write_text(json.dumps({**json.loads(measured_with), "trained_with_lookup_tokens": 0}))
    assert main([*argv, "--limit", "2", "--resume"]) == 2  # still refused
    error = capsys.readouterr().err
    assert ("measured with other policy settings than this run loads: eagle3-candidate-policy's policy changed in "
            "config.json, not in model.safetensors (loaded.methods.eagle3-candidate-policy.policy: ") in error
    assert "Only config.json was edited since the run began, no weights (no policy was retrained)" in error
    assert "retrained or replaced" not in error
    config.write_text(measured_with)  # restored: resumes
    assert main([*argv, "--limit", "2", "--resume"]) == 0


@pytest.mark.parametrize("extra, named", [
    (("--ltd_policy", "some/policy"), "--ltd-policy (eagle3-ltd"),
    (("--methods", "stock,eagle3", "--candidate_checkpoint", "c"), "--candidate-checkpoint"),
    (("--methods", "stock,eagle3@2/2/3", "--tree_depth", "3"), "--tree-depth"),  # the method's own tree
    (("--methods", "stock,dvi", "--dvi_adapter", "a", "--dvi_exit_layer", "2"), "--dvi-exit-layer"),
    (("--methods", "stock,eagle3-confidence", "--assistant_confidence_threshold", "0.2"),
     "--assistant-confidence-threshold"),  # the policy runs transformers' default, 0.4
    (("--methods", "stock,tree+lookup8", "--lookup_tokens", "4"), "--lookup-tokens"),  # +lookup8 is its own length
    (("--prompt_lookup_num_tokens", "3", "--drafter_layers", "2"), "reads --drafter-layers (hf-assistant and tree"),
])
def test_method_options_no_selected_method_reads_are_refused(bench_model_dir: Path, questions_file: Path,
                                                             tmp_path: Path, capsys, extra, named):
    """They were accepted and ignored, and the report listed them among the run's settings."""
    assert main(bench_argv(bench_model_dir, questions_file, tmp_path / "out.json", *extra)) == 2
    err = capsys.readouterr().err
    assert "no selected method (" in err and named in err and "drop it" in err
    assert "prompt-lookup-num-tokens" not in err  # hf-prompt-lookup, a default method, reads it


def test_method_options_are_read_as_each_method_declares():
    from hf_adaptive_spec.bench.methods import build_methods

    options = MethodOptions()
    methods = build_methods(["tree@2/2/3+lookup", "eagle3-ltd+lookup8", "dvi", "hf-early-exit", "eagle3"])
    assert methods["tree@2/2/3+lookup"].options_read(options) == {"drafter_layers", "lookup_tokens",
                                                                    "lookup_ngram_size"}
    assert methods["eagle3-ltd+lookup8"].options_read(options) == {"eagle3_checkpoint", "ltd_policy",
                                                                     "lookup_ngram_size"}
    assert methods["dvi"].options_read(options) == {"dvi_adapter", "dvi_depth", "dvi_exit_layer"}
    assert methods["hf-early-exit"].options_read(options) == {
        "early_exit_layers", "num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold"}
    assert methods["eagle3"].options_read(options) == {"eagle3_checkpoint", "tree_depth", "tree_top_k",
                                                       "tree_total_tokens"}
