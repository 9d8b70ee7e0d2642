"""What the bench refuses before it loads anything (found by an audit of the bench): outputs it could not write at the
end of a run, a --json of another kind, a --device torch cannot place a model on, and a --tree_profile that no method
takes from, that drafts its tree otherwise than ranked, or that was timed with other threads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from hf_adaptive_spec.bench import cli
from hf_adaptive_spec.bench.cli import main
from hf_adaptive_spec.bench.errors import BenchError
from hf_adaptive_spec.profiling import HardwareProfile

from .test_bench_cli import bench_argv

#: the error of a run that got past every check to loading the model (:func:`no_loading`)
LOADED = "the checks let the run load its model"


@pytest.fixture(autouse=True)
def keeps_torch_threads():
    """A run sets --num-threads for the whole process: give the next tests the threads they had."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def no_loading(monkeypatch):
    """A run that passes every check stops at loading the model, with :data:`LOADED`."""

    def load_model(*args, **kwargs):
        raise BenchError(LOADED)

    monkeypatch.setattr(cli, "load_model", load_model)


def refused(argv: list[str], capsys) -> str:
    """The one-line error of ``main(argv)``, which must refuse the run."""
    assert main(argv) == 2
    return capsys.readouterr().err


def save_profile(file: Path, tree: dict | None = None, lookup_tokens: int | None = None, **measured) -> Path:
    """A CPU float32 eager profile of one thread recommending ``tree`` (2/2/4 drafted every cycle by default) and
    ``lookup_tokens`` (default: the tree's, else none)."""
    tree = tree or {"depth": 2, "top_k": 2, "total_tokens": 4, "tau": 2.0, "tokens_per_second": 10.0}
    branch = tree.get("lookup_tokens", 0) if lookup_tokens is None else lookup_tokens
    settings = {"device": "cpu", "dtype": "float32", "num_threads": 1, "context_length": 64, **measured}
    HardwareProfile(**settings, verify_tokens=[1, 8], verify_seconds=[1.0, 1.0],
                    recommendation={"tree": tree, "policy": None, "lookup_tokens": branch}).save(file)
    return file


@pytest.mark.parametrize(("flag", "make", "named"), [
    ("--markdown", "folder", "--markdown '{path}' names a folder"),
    ("--markdown", "", "--markdown '.' names a folder"),  # "" parses to the current folder
    ("--json", "", "--json '.' names a folder"),  # failed raw, setting up the progress file's lock
    ("--json", "folder", "--json '{path}' names a folder"),
    ("--plots", "file", "--plots {path} is a file: give a folder for the PNG plots"),
    ("--markdown", "under a file", "--markdown: {path.parent.parent} is a file, so the folder {path.parent} cannot"),
])  # fmt: skip
def test_an_output_the_run_could_not_write_is_refused_before_anything_loads(
        questions_file: Path, tmp_path: Path, capsys, no_loading, flag, make, named):
    """Checked only when written, after the whole run: a raw IsADirectoryError, FileExistsError or ValueError, and the
    results' table (printed last) never shown."""
    path = {"folder": tmp_path / "out", "file": tmp_path / "plots.png", "": Path(""),
            "under a file": tmp_path / "notes.txt" / "run" / "out.md"}[make]
    if make == "folder":
        path.mkdir()
    elif make in ("file", "under a file"):
        (tmp_path / ("plots.png" if make == "file" else "notes.txt")).write_text("kept")
    argv = [*bench_argv(tmp_path / "model", questions_file, tmp_path / "run.json"), flag, str(path)]
    assert named.format(path=path) in refused(argv, capsys)
    assert not (tmp_path / "run.progress.jsonl").exists()


def test_a_run_over_a_json_of_another_kind_is_refused_before_anything_loads(
        questions_file: Path, tmp_path: Path, capsys, no_loading):
    """`bench --json profile.json` replaced a hardware profile with its report (and wrote profile.progress.jsonl);
    a bench report at --json is replaced, as a run again is meant to."""
    profile = save_profile(tmp_path / "profile.json")
    kept = profile.read_text()
    error = refused(bench_argv(tmp_path / "model", questions_file, profile), capsys)
    assert f"--json {profile} holds a hardware profile" in error and "Pass another --json" in error
    assert profile.read_text() == kept and not (tmp_path / "profile.progress.jsonl").exists()
    (tmp_path / "notes.json").write_text("{not json")
    assert "holds no bench report" in refused(bench_argv(tmp_path / "model", questions_file, tmp_path / "notes.json"),
                                              capsys)
    (tmp_path / "report.json").write_text(json.dumps({"settings": {}, "records": []}))
    assert LOADED in refused(bench_argv(tmp_path / "model", questions_file, tmp_path / "report.json"), capsys)


@pytest.mark.parametrize(("device", "named"), [
    ("foo", "--device 'foo'"),
    ("cuda", "--device cuda was asked for, but torch sees no CUDA device"),
    ("cuda:0", "--device cuda:0 was asked for, but torch sees no CUDA device"),
])  # fmt: skip
def test_a_device_torch_cannot_place_a_model_on_is_a_one_line_error(
        questions_file: Path, tmp_path: Path, capsys, no_loading, device, named):
    """A raw RuntimeError (foo), ValueError (cuda) or AssertionError "Torch not compiled with CUDA enabled"
    (cuda:0) on a machine without a GPU."""
    if device != "foo" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    argv = [*bench_argv(tmp_path / "model", questions_file, tmp_path / "run.json"), "--device", device]
    error = refused(argv, capsys)
    assert error.startswith(f"hf-adaptive-spec bench: error: {named}") and error.count("\n") == 1


def test_a_tree_profile_no_selected_method_takes_anything_from_is_refused(
        questions_file: Path, tmp_path: Path, capsys, no_loading):
    """It was listed in the report (with the tree it filled in) as if it shaped a result, where --tree-depth is
    refused; a method that takes only its prompt-lookup branch takes something."""
    profile = save_profile(tmp_path / "profile.json")
    argv = [*bench_argv(tmp_path / "model", questions_file, tmp_path / "run.json"), "--tree_profile", str(profile)]
    error = refused(argv, capsys)  # stock,hf-prompt-lookup
    assert f"--tree_profile {profile}: no selected method (stock, hf-prompt-lookup) takes anything from it" in error
    assert LOADED in refused([*argv, "--methods", "stock,tree@2/2/4+lookup"], capsys)  # its branch
    assert "takes anything from it" in refused([*argv, "--methods", "stock,tree@2/2/4+lookup", "--lookup_tokens", "3"],
                                               capsys)


def test_a_tree_profile_timed_with_other_threads_is_refused(questions_file: Path, tmp_path: Path, capsys, no_loading):
    """A profile of 16 threads was taken by a 1-thread run without a word: a many-token verification costs
    another multiple of one token's with other threads, so the tree was ranked on another curve."""
    profile = save_profile(tmp_path / "profile.json", num_threads=16)
    argv = [*bench_argv(tmp_path / "model", questions_file, tmp_path / "run.json"), "--methods", "stock,tree",
            "--tree_profile", str(profile)]  # --num-threads 1
    error = refused(argv, capsys)
    assert f"--tree_profile {profile} was measured with 16 CPU threads, and this run uses 1" in error
    assert "Pass --num-threads 16" in error
    assert LOADED in refused([*argv, "--num-threads", "16"], capsys)


def test_a_tree_profile_drafts_its_tree_as_ranked(questions_file: Path, tmp_path: Path, capsys, no_loading):
    """A profile recommending a LookupFirstPolicy gave eagle3+lookup its tree, drafted every cycle under the
    profile's name; a method with its own @D/K/N takes no tree from it, and may time it the other way."""
    lookup_first = {"depth": 2, "top_k": 2, "total_tokens": 4, "tau": 1.5, "tokens_per_second": 10.0,
                    "lookup_tokens": 2, "lookup_first": True}
    profile = save_profile(tmp_path / "profile.json", lookup_first)
    argv = [*bench_argv(tmp_path / "model", questions_file, tmp_path / "run.json"), "--tree_profile", str(profile),
            "--eagle3_checkpoint", str(tmp_path / "drafter")]
    error = refused([*argv, "--methods", "stock,eagle3+lookup"], capsys)
    assert "ranked its tree (2/2/4) drafted only where its prompt-lookup branch did not match" in error
    assert "eagle3+lookup would draft it every cycle" in error and "Run eagle3-lookup-first+lookup" in error
    assert LOADED in refused([*argv, "--methods", "stock,eagle3-lookup-first+lookup,eagle3@2/2/4+lookup"], capsys)
    save_profile(profile)  # drafted every cycle
    error = refused([*argv, "--methods", "stock,eagle3+lookup,eagle3-lookup-first+lookup"], capsys)
    assert "drafted every cycle (StaticTreePolicy), and eagle3-lookup-first+lookup would draft it only where" in error


def test_a_tree_profile_drafts_its_tree_with_the_branch_it_was_ranked_with(questions_file: Path, tmp_path: Path,
                                                                          capsys, no_loading):
    """A profile ranks its trees with and without the prompt-lookup branch and keeps the best: a tree ranked with the
    branch went to eagle3 without one (and a tree ranked without it to eagle3+lookup), timed as the profile's tree."""
    with_branch = {"depth": 1, "top_k": 4, "total_tokens": 5, "tau": 2.1, "tokens_per_second": 50.0,
                   "lookup_tokens": 4, "lookup_first": False}
    profile = save_profile(tmp_path / "profile.json", with_branch)
    argv = [*bench_argv(tmp_path / "model", questions_file, tmp_path / "run.json"), "--tree_profile", str(profile),
            "--eagle3_checkpoint", str(tmp_path / "drafter")]
    error = refused([*argv, "--methods", "stock,eagle3,eagle3+lookup"], capsys)
    assert "(1/4/5) with its 4-token prompt-lookup branch, and eagle3 would draft it without one" in error
    assert "Run eagle3+lookup for the profile's recommendation" in error and "e.g. eagle3@1/4/5." in error
    assert "Run tree+lookup+sized for" in refused([*argv, "--methods", "stock,tree+sized"], capsys)
    assert LOADED in refused([*argv, "--methods", "stock,eagle3+lookup,eagle3@1/4/5,tree+lookup2"], capsys)
    save_profile(profile, {key: value for key, value in with_branch.items() if key != "lookup_tokens"}, 4)
    assert "eagle3 would draft it without one" in refused([*argv, "--methods", "stock,eagle3"], capsys)  # older
    save_profile(profile)  # ranked without the branch
    error = refused([*argv, "--methods", "stock,tree,eagle3+lookup3+sized"], capsys)
    assert "(2/2/4) without a prompt-lookup branch, and eagle3+lookup3+sized would draft it with one" in error
    assert "Run eagle3+sized for" in error and "e.g. eagle3@2/2/4+lookup3+sized." in error
    assert LOADED in refused([*argv, "--methods", "stock,tree,eagle3"], capsys)


def test_verify_buckets_no_model_that_decodes_takes_are_refused(questions_file: Path, tmp_path: Path, capsys,
                                                                no_loading):
    """Set on the run's model, which only stock decodes with where every engine method is +fp32 (the float32 copy
    keeps the default buckets): accepted, and listed in the report as the run's buckets."""
    argv = [*bench_argv(tmp_path / "model", questions_file, tmp_path / "run.json"), "--dtype", "bfloat16",
            "--compile", "--verify_buckets", "2,4"]
    error = refused([*argv, "--methods", "stock,tree+fp32"], capsys)
    assert "--verify_buckets sets the verification sizes" in error and "--fp32_verify_buckets sets" in error
    assert LOADED in refused([*argv, "--methods", "stock,tree,tree+fp32"], capsys)


def test_fp32_verify_buckets_without_a_float32_engine_method_are_refused(questions_file: Path, tmp_path: Path, capsys,
                                                                         no_loading):
    """Set on the float32 copy, which only +fp32 engine methods on the compiled path decode with: refused without
    one (the report would list buckets no method verified in), and a size below 2 is refused by name."""
    argv = [*bench_argv(tmp_path / "model", questions_file, tmp_path / "run.json"), "--dtype", "bfloat16",
            "--fp32_verify_buckets", "2,5"]
    error = refused([*argv, "--compile", "--methods", "stock,tree"], capsys)
    assert "--fp32_verify_buckets sets the verification sizes of the float32 copy" in error
    assert "--fp32_verify_buckets sets" in refused([*argv, "--methods", "stock,tree+fp32"], capsys)  # eager
    assert LOADED in refused([*argv, "--compile", "--methods", "stock,tree+fp32"], capsys)
    bad = refused([*argv[:-1], "1,5", "--compile", "--methods", "stock,tree+fp32"], capsys)
    assert "--fp32_verify_buckets: Buckets 1,5" in bad and "give sizes >= 2" in bad


def test_a_tree_profile_timed_in_another_cache_length_is_refused_for_the_runs_one_cache(
        bench_model_dir: Path, questions_file: Path, tmp_path: Path, capsys, monkeypatch):
    """A static cache attends over every slot: a tree ranked on buckets timed in 512 slots was run in the cache sized
    to the questions without a word (a profile timed in a shorter cache under-charges every bucket)."""

    def prepared(*args, **kwargs):
        raise BenchError("every method prepared")

    monkeypatch.setattr(cli, "_measured_settings", prepared)
    profile = save_profile(tmp_path / "profile.json", path="compiled", buckets=[8], cache_slots=512)
    argv = [*bench_argv(bench_model_dir, questions_file, tmp_path / "run.json"), "--drafter-layers", "2", "--compile",
            "--tree_profile", str(profile), "--methods", "stock,tree"]
    error = refused(argv, capsys).splitlines()[-1]
    assert f"--tree_profile {profile} timed its buckets in a StaticCache of 512 slots, and tree would decode" in error
    assert "Pass --max_cache_len 512" in error
    assert "every method prepared" in refused([*argv, "--max_cache_len", "512"], capsys)
    assert "every method prepared" in refused([*argv, "--methods", "stock,tree+sized"], capsys)  # sized per call


def test_a_model_without_a_chat_template_or_not_there_is_refused_naming_model(bench_model_dir, tmp_path, monkeypatch):
    """The bench and the profile each had their own loader and words; they share
    default_model.load_chat_model_for_option now, so the bench's refusals name --model and the fix as the profile's do
    (the bench's had no test)."""
    import shutil

    folder = tmp_path / "no-template"
    shutil.copytree(bench_model_dir, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    for template_file in folder.glob("chat_template.*"):
        template_file.unlink()
    with pytest.raises(BenchError, match=re.escape(f"--model {folder}: its tokenizer has no chat template, and the "
                                                   "bench prompts it with each question's chat turns: use a chat "
                                                   "(instruct) model")):
        cli.load_model(str(folder), "float32", torch.device("cpu"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BenchError, match=re.escape(f"--model ./not-here: cannot load it: no model folder at "
                                                   f"{tmp_path / 'not-here'}")):
        cli.load_model("./not-here", "float32", torch.device("cpu"))
