"""Ahead-of-time packages that are damaged, vanish, or live in a folder that cannot be written: each is rebuilt or the
forward compiles in-process, with a warning; never a wrong token, a crash or a raw error from deep inside. Unit tests
with a stand-in for AOTInductor (no package is compiled here), and the package_dir values fast_path takes."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
import torch
from test_packages import _frozen_generate
from tiny_models import prompt, tiny_model

from hf_adaptive_spec.core import files
from hf_adaptive_spec.core.files import write_text_atomically
from hf_adaptive_spec.core.packaged import PACKAGE_DIR_ENV, PackageBuildError, PackagedForward, default_package_dir
from hf_adaptive_spec.generation.static_path import fast_path

WEIGHTS = b"\x01\x02\x03\x04" * 4096


def _zip_package(path) -> None:
    """A stand-in package: a zip of stored (uncompressed) members, as AOTInductor writes them."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("data/aotinductor/model/wrapper.so", b"\x7fELF" + b"\x90" * 4096)
        archive.writestr("data/weights/weight_0", WEIGHTS)


@pytest.fixture
def loads(monkeypatch):
    """AOTInductor's loader replaced by one that loads anything (as it loads a package with damaged weights or code):
    the paths it was asked to load."""
    loaded = []

    def load(path):
        loaded.append(path)
        return lambda *args: ("runner of", path)

    monkeypatch.setattr(torch._inductor, "aoti_load_package", load)
    return loaded


@pytest.fixture
def builds(monkeypatch):
    """AOTInductor's export and compile replaced by ones that write a stand-in package (no compile)."""
    monkeypatch.setattr(torch.export, "export", lambda module, args, strict=True: module)
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package",
                        lambda exported, package_path, inductor_configs: _zip_package(package_path))


def _forward(folder) -> PackagedForward:
    return PackagedForward(folder, {"weights": "a", "config": "{}"}, {"freezing": True})


def test_a_package_failing_its_checksums_is_removed_and_rebuilt_not_loaded(tmp_path, loads, builds):
    """Bytes flipped inside a package's weights loaded them (wrong tokens), and inside its code crashed the process
    (SIGILL): the zip's checksums are checked before the load."""
    forward = _forward(tmp_path)
    path = forward.path_for("key")
    _zip_package(path)
    data = bytearray(path.read_bytes())
    at = data.index(WEIGHTS) + 100
    data[at:at + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match=r"does not load \(its member data/weights/weight_0 fails its checksum.*"
                                         r"building it again"):
        assert forward._load(path) is None
    assert not path.exists() and loads == []
    forward("key", lambda: torch.nn.Identity(), torch.zeros(1))  # rebuilt, then loaded
    assert forward.built == 1 and loads == [str(path)]


def test_a_damaged_package_in_a_read_only_folder_is_not_removed_nor_raised(tmp_path, loads, monkeypatch):
    forward = _forward(tmp_path)
    path = forward.path_for("key")
    path.write_bytes(b"not a zip")

    def unlink(self, missing_ok=False):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(path), "unlink", unlink)
    with pytest.warns(UserWarning, match=r"does not load .*it cannot be removed .*Permission denied.*building it"):
        assert forward._load(path) is None
    assert loads == []


@pytest.mark.parametrize("problem", ["a file", "read-only"])
def test_a_packages_folder_that_cannot_be_written_fails_the_build_by_name(tmp_path, problem, monkeypatch):
    """The build made its folder before its error handling: a read-only folder, a file or a missing parent raised a
    raw PermissionError or NotADirectoryError out of generate. It is a failed build, which the fast path answers by
    compiling in-process with a warning."""
    folder = tmp_path / "packages"
    if problem == "a file":
        folder.write_text("x")
    else:
        def mkdir(self, *args, **kwargs):
            raise PermissionError(13, "Permission denied", str(self))

        monkeypatch.setattr(type(folder), "mkdir", mkdir)
    message = (rf"in {folder} failed \((NotADirectoryError|PermissionError).*package_dir=\.\.\.\) or "
               rf"\${PACKAGE_DIR_ENV}.*package_dir=None")
    with pytest.raises(PackageBuildError, match=message):
        _forward(folder)("key", lambda: torch.nn.Identity(), torch.zeros(1))


def test_generate_with_a_file_as_packages_folder_compiles_in_process_and_says_so(tmp_path):
    model = tiny_model("llama", seed=3)
    (tmp_path / "file").write_text("x")
    fast_path(model, package_dir=tmp_path / "file")
    ids = prompt(6, seed=4)
    with pytest.warns(UserWarning, match=r"in .*file failed \(NotADirectoryError.*Compiling in-process instead"):
        out = _frozen_generate(model, ids)
    assert torch.equal(out.sequences, model.generate(ids, max_new_tokens=24, do_sample=False))
    assert out.speculation.compiled and not out.speculation.packaged


def test_a_package_deleted_between_its_build_and_its_load_is_a_failed_build(tmp_path, loads, builds, monkeypatch):
    """`hf-adaptive-spec packages --delete-unused-days 0 --yes` run meanwhile raised a raw RuntimeError."""
    built = PackagedForward._build

    def build_then_delete(self, path, *args):
        built(self, path, *args)
        path.unlink()

    monkeypatch.setattr(PackagedForward, "_build", build_then_delete)
    with pytest.raises(PackageBuildError, match=r"was just built but does not load \(FileNotFoundError.*deleted "
                                                r"meanwhile.*package_dir=None"):
        _forward(tmp_path)("key", lambda: torch.nn.Identity(), torch.zeros(1))


def test_two_writers_of_one_file_each_write_through_a_temporary_file_of_their_own(tmp_path, monkeypatch):
    """Two builders of one package write its sidecar at once: through one fixed '<name>.partial' the second renamed
    the first's file away, and the first failed with FileNotFoundError (its build was lost)."""
    path, real_replace, nested = tmp_path / "described.json", os.replace, []

    def replace(source, target):
        if not nested:  # another process writes the same file between this one's write and its rename
            nested.append(True)
            write_text_atomically(path, "second")
        real_replace(source, target)

    monkeypatch.setattr(files.os, "replace", replace)
    write_text_atomically(path, "first")
    assert path.read_text() == "first" and [p.name for p in tmp_path.iterdir()] == ["described.json"]


@pytest.mark.skipif(files.fcntl is None, reason="no flock on this platform: no lock is taken")
@pytest.mark.parametrize("meanwhile", ["replaced", "removed"])
def test_a_lock_is_taken_on_the_file_the_path_names_when_it_was_replaced_between_open_and_lock(tmp_path, monkeypatch,
                                                                                              meanwhile):
    """Marking cut answers renames a new file over the one regeneration appends to, and a run's lock file is removed
    when nothing filled it: a second writer that opened the old file just before and locked it just after held a lock
    on a file the path no longer names, and appended into it alone (its records lost), beside a third writer of the
    new file. The lock is taken again on the file the path names."""
    path, real_flock, replaced = tmp_path / "data.jsonl", files.fcntl.flock, []

    def flock(handle, operation):
        if not replaced:  # the holder's rename (or removal) lands between this writer's open and its lock
            replaced.append(True)
            if meanwhile == "replaced":
                (tmp_path / "new").write_text("marked\n")
                os.replace(tmp_path / "new", path)
            else:
                path.unlink()
        real_flock(handle, operation)

    path.write_text("records\n")
    monkeypatch.setattr(files.fcntl, "flock", flock)
    with files.lock_exclusively(path, "busy") as handle:
        assert os.path.samestat(os.stat(path), os.fstat(handle.fileno()))


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def full_disk(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomically(tmp_path / "described.json", "text")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value, error, message", [
    (123, TypeError, "a str or os.PathLike .*None: no packages.*got int 123"),
    (b"/tmp/packages", TypeError, "a str or os.PathLike .*got bytes b'/tmp/packages'"),
    (["packages"], TypeError, r"a str or os.PathLike .*got list \['packages'\]"),
    ("", ValueError, "package_dir is empty \\(it would be the current folder\\)"),
    (" ", ValueError, "package_dir is empty"),
])
def test_package_dir_values_that_name_no_folder_are_refused(llama, value, error, message):
    with pytest.raises(error, match=message):
        fast_path(llama, package_dir=value)


def test_a_folder_named_default_is_that_folder_and_left_out_is_the_default_folder(tmp_path, monkeypatch):
    """package_dir="default" meant the default cache folder, not ./default."""
    monkeypatch.setenv(PACKAGE_DIR_ENV, str(tmp_path / "cache"))
    model = tiny_model("llama")
    assert fast_path(model).package_dir == default_package_dir() == tmp_path / "cache"
    assert fast_path(model, package_dir="default").package_dir == Path("default")


def test_a_peft_adapted_model_is_named_as_such_and_its_build_gives_no_folder_advice(tmp_path, builds):
    """A LoRA adapter on the target: the twin failed setting a peft tensor ('Linear has no attribute base_layer') and
    the warning told the user to keep packages in another folder; the modules are compared first, the adapter is
    named with merge_and_unload(), and a model that cannot be packaged gets no folder advice."""
    from peft import LoraConfig, get_peft_model

    from hf_adaptive_spec.core.packaged import UnpackageableModel, weight_sharing_twin

    model = tiny_model("llama")
    get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj"]))
    with pytest.raises(UnpackageableModel, match=r"self_attn.q_proj.*a peft adapter's layers \(merge_and_unload\(\)"):
        weight_sharing_twin(model)
    forward = _forward(tmp_path)

    def untraceable():
        return weight_sharing_twin(model)

    untraceable_message = r"^No ahead-of-time package can be traced for this model: .*peft"
    with pytest.raises(PackageBuildError, match=untraceable_message) as got:
        forward("key", untraceable, torch.zeros(1))
    assert "folder" not in str(got.value)
