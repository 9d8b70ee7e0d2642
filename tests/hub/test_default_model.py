"""The embedded default model's conversion cache: published whole, once, whatever runs beside it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from hf_adaptive_spec import default_model


class _Saved:
    """Stands in for the converted model and tokenizer: ``save_pretrained`` writes ``files`` (name -> text), then
    runs ``then`` (what another process does meanwhile)."""

    def __init__(self, files: dict[str, str], then=lambda: None):
        self.files, self.then, self.config = files, then, SimpleNamespace()

    def save_pretrained(self, folder, **kwargs) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (Path(folder) / name).write_text(text)
        self.then()


def _convert_with(monkeypatch, model: _Saved, tokenizer: _Saved, target: Path) -> Path:
    """``convert_embedded_gguf(target)`` with ``model`` and ``tokenizer`` as what the GGUF file dequantises to."""
    monkeypatch.setattr(default_model, "embedded_gguf_path", lambda: Path("/gguf/SmolLM2.gguf"))
    monkeypatch.setattr(default_model.importlib_util, "find_spec", lambda name: object())
    monkeypatch.setattr(default_model, "AutoModelForCausalLM", SimpleNamespace(from_pretrained=lambda *a, **k: model))
    monkeypatch.setattr(default_model, "AutoTokenizer", SimpleNamespace(from_pretrained=lambda *a, **k: tokenizer))
    return default_model.convert_embedded_gguf(target)


def _publish_theirs(target: Path) -> None:
    target.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (target / name).write_text("theirs")


def test_a_conversion_another_process_published_first_is_kept(tmp_path: Path, monkeypatch):
    """Two processes converting at once: the second one's rename onto the first one's folder raised "Directory not
    empty" (OSError), though the cache was complete."""
    target = tmp_path / "cache" / "converted"
    model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
    tokenizer = _Saved({"tokenizer.json": "mine"}, then=lambda: _publish_theirs(target))
    assert _convert_with(monkeypatch, model, tokenizer, target) == target
    assert (target / "model.safetensors").read_text() == "theirs"
    assert sorted(path.name for path in target.parent.iterdir()) == ["converted"]  # no partial folder left


def test_a_crashed_conversion_s_leftovers_are_not_published(tmp_path: Path, monkeypatch):
    """Every conversion wrote into one '.partial' folder: a crashed one's files (a shard index here) were renamed
    into the cache with the next conversion's, and two conversions at once wrote into the same folder."""
    target = tmp_path / "converted"
    stale = tmp_path / "converted.partial"
    stale.mkdir()
    (stale / "model.safetensors.index.json").write_text("{}")
    model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
    _convert_with(monkeypatch, model, _Saved({"tokenizer.json": "mine"}), target)
    assert sorted(path.name for path in target.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_a_folder_in_the_way_that_holds_no_conversion_is_named_not_deleted(tmp_path: Path, monkeypatch):
    target = tmp_path / "converted"
    target.mkdir()
    (target / "notes.txt").write_text("a user's")
    model = _Saved({"config.json": "mine", "model.safetensors": "mine"})
    with pytest.raises(OSError, match=rf"'{target}': the folder exists and holds no finished conversion.*Remove it"):
        _convert_with(monkeypatch, model, _Saved({"tokenizer.json": "mine"}), target)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["converted"]
    assert (target / "notes.txt").read_text() == "a user's"
