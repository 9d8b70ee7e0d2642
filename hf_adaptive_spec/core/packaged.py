"""Forwards compiled ahead of time into AOTInductor packages that later processes load, not compile.

Inductor's weight freezing is what makes a compiled forward pay on a CPU (the linear weights are
prepacked for oneDNN), and it is also what keeps inductor's on-disk caches from helping a new
process: AOTAutograd refuses to cache a frozen graph and the prepacked weights cannot be pickled,
so every process traced, froze and lowered each 30-layer verification graph again (about 30 s per
graph on 2 CPU cores). A package made by ``torch.export`` + ``torch._inductor.aoti_compile_and_package``
holds the frozen, compiled forward with its weights; loading one takes about a second.

A package bakes in the weights, so its file name is a digest of everything it depends on: the
weights' bytes, the model's config, the input shapes and dtypes, the compile options and the
versions of torch, transformers and this package. Changing any of them makes another package;
nothing stale is ever loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import threading
import time
import warnings
import zipfile
from collections.abc import Callable, Hashable
from pathlib import Path

import torch

from .features import CAPTURE_HOOK
from .files import TEMPORARY_NAME_SUFFIX, write_text_atomically

#: bump when what a package computes changes in a way its digest would not see.
PACKAGE_FORMAT = 1

PACKAGE_DIR_ENV = "HF_ADAPTIVE_SPEC_PACKAGES"
#: the packages folder when ``$HF_ADAPTIVE_SPEC_PACKAGES`` is unset
FALLBACK_PACKAGE_DIR = "~/.cache/hf_adaptive_spec/packages"
#: where packages go by default, as messages name it
DEFAULT_PACKAGE_DIR_TEXT = f"${PACKAGE_DIR_ENV}, else {FALLBACK_PACKAGE_DIR}"


def default_package_dir() -> Path:
    """``$HF_ADAPTIVE_SPEC_PACKAGES``, else ``~/.cache/hf_adaptive_spec/packages``."""
    return Path(os.environ.get(PACKAGE_DIR_ENV) or FALLBACK_PACKAGE_DIR).expanduser()


def named_tensors(module: torch.nn.Module):
    """Parameters, buffers and plain tensor attributes of every submodule, by dotted name."""
    for prefix, submodule in module.named_modules(remove_duplicate=False):
        owned = {**submodule._parameters, **submodule._buffers}
        plain = {name: value for name, value in vars(submodule).items() if isinstance(value, torch.Tensor)}
        for name, tensor in {**plain, **owned}.items():
            if tensor is not None:
                yield (f"{prefix}.{name}" if prefix else name), tensor


_UNSEEN_WRITES = "_hf_adaptive_spec_unseen_writes"


def mark_weights_changed(module: torch.nn.Module) -> None:
    """Count a write to ``module``'s weights that their versions do not show (through ``.data``, or to a tensor made
    under ``torch.inference_mode``) on it and on each of its submodules, so that :func:`weights_version` of any of
    them changes: of the module itself, or of a drafter's part that shares some of its layers."""
    for submodule in module.modules():
        setattr(submodule, _UNSEEN_WRITES, unseen_writes(submodule) + 1)


def unseen_writes(module: torch.nn.Module) -> int:
    """How many writes to ``module``'s weights their versions do not show were marked (:func:`mark_weights_changed`)."""
    return getattr(module, _UNSEEN_WRITES, 0)


def weights_version(model: torch.nn.Module) -> tuple:
    """Which tensors ``model`` holds and how often each was written in place (``Tensor._version``, which
    optimizer steps, ``copy_`` and ``load_state_dict`` bump): equal while the weights are unchanged. Tensors
    made under ``torch.inference_mode`` keep no such count, and can only change by being replaced; writes no
    version shows count once marked (:func:`mark_weights_changed`)."""
    tensors = tuple((name, tensor.data_ptr(), None if tensor.is_inference() else tensor._version)
                    for name, tensor in named_tensors(model))  # the tensors a package's digest covers
    return tensors, tuple(unseen_writes(submodule) for submodule in model.modules())


def weights_digest(module: torch.nn.Module) -> str:
    """A digest of every parameter's, buffer's and tensor attribute's name, dtype, shape and bytes."""
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in named_tensors(module):
        data = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}:{data.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


#: module attributes that do not change what a forward computes: the mode (packages are traced in evaluation mode)
#: and where the weights were loaded from
_NOT_COMPUTED = frozenset({"training", "name_or_path"})
_PLAIN = (int, float, str, bool, type(None))


def module_settings(model: torch.nn.Module) -> tuple:
    """Each module's class and plain settings (numbers, strings, flags and tuples of them: a norm's epsilon, a
    scaling; an activation's kind is its class), by dotted name: what a forward computes besides the weights and the
    code, which a module swapped or re-set on the instance changes (a package, traced once, would not)."""
    return tuple((name, type(module).__qualname__, _plain_settings(module)) for name, module in model.named_modules())


def module_settings_digest(model: torch.nn.Module) -> str:
    """A digest of :func:`module_settings`, for a package's identity."""
    return hashlib.blake2b(repr(module_settings(model)).encode(), digest_size=16).hexdigest()


def _plain_settings(module: torch.nn.Module) -> tuple:
    plain = lambda value: isinstance(value, _PLAIN) or (  # noqa: E731
        isinstance(value, tuple) and all(isinstance(item, _PLAIN) for item in value))
    return tuple(sorted((name, value) for name, value in vars(module).items()
                        if not name.startswith("_") and name not in _NOT_COMPUTED and plain(value)))


class UnpackageableModel(ValueError):
    """The model holds modules its config does not build (:func:`weight_sharing_twin`): no package can be traced."""


def weight_sharing_twin(model: torch.nn.Module) -> torch.nn.Module:
    """Another instance of ``model``'s class (built on the meta device from its config) holding the
    very same parameter, buffer and tensor-attribute objects and each module's plain settings
    (:func:`module_settings`: a norm's epsilon set on the instance, a config edited after the model was built),
    without ``model``'s hooks and other attributes; a model holding modules of other classes than its config builds
    (an activation swapped) is refused. ``torch.export`` swaps the traced module's weights for fake tensors while it
    traces; tracing the twin leaves ``model`` to other threads' calls meanwhile."""
    with torch.device("meta"):
        twin = type(model)(model.config)
    # the modules first: a tensor of a module the config does not build (a peft LoRA layer's) has nowhere to go
    built, held = dict(twin.named_modules()), dict(model.named_modules())
    swapped = [name or "(the model)" for name in {**held, **built} if type(held.get(name)) is not type(built.get(name))]
    if swapped:
        adapted = any(type(module).__module__.startswith("peft.") for module in held.values())
        raise UnpackageableModel(
            f"{type(model).__name__} holds modules its config does not build ({', '.join(sorted(swapped)[:3])}: "
            "swapped, added or removed on the instance), which a package traced from the config's modules would "
            "leave out" + (": a peft adapter's layers (merge_and_unload() folds them into the model's own)"
                           if adapted else "")
        )
    for name, tensor in named_tensors(model):
        owner, _, leaf = name.rpartition(".")
        setattr(twin.get_submodule(owner), leaf, tensor)
    left = [name for name, tensor in named_tensors(twin) if tensor.is_meta]
    if left:
        raise ValueError(f"{type(model).__name__} built from its config has tensors its instance lacks: {left[:3]}")
    for name, module in held.items():  # a setting set on the instance, or the config edited since the model was built
        vars(built[name]).update(_plain_settings(module))
    return twin.eval()


def forward_changes(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    """What changes ``model``'s forward besides its code, which a package traced from :func:`weight_sharing_twin`
    would leave out and an in-process graph keeps as it was when traced (dynamo does not guard on hooks): per module
    with forward (pre-)hooks (activation steering, probes, accelerate's offloading) or a ``forward`` replaced on the
    instance, and for global module hooks, the identities of what changes it (equal while nothing changed). Hooks that
    only read (:func:`_reads_only`) are not counted."""
    from torch.nn.modules import module as nn_module

    changed = {}
    global_hooks = [*nn_module._global_forward_hooks.values(), *nn_module._global_forward_pre_hooks.values()]
    if global_hooks:
        changed["(global module hooks)"] = tuple(id(hook) for hook in global_hooks)
    for name, module in model.named_modules():
        hooks = [*module._forward_hooks.values(), *module._forward_pre_hooks.values()]
        marks = [id(hook) for hook in hooks if not _reads_only(hook)]
        if "forward" in vars(module):
            marks.append(id(vars(module)["forward"]))
        if marks:
            changed[name or type(model).__name__] = tuple(marks)
    return changed


def _reads_only(hook) -> bool:
    """Hooks known to change no output: the feature capture's (:data:`~hf_adaptive_spec.core.features.CAPTURE_HOOK`),
    transformers' output capturing (added for good by the first forward asked for hidden states or attentions) and
    the one ``enable_input_require_grads`` adds (it sets ``requires_grad``)."""
    function = getattr(hook, "func", hook)  # a functools.partial's function
    return (getattr(hook, CAPTURE_HOOK, False)
            or getattr(function, "__module__", "") == "transformers.utils.output_capturing"
            or getattr(function, "__name__", "") == "make_inputs_require_grads")


class StaleWeightsError(Exception):
    """The weights changed since a package identity digested them, without a version bump the caller saw, or the
    modules' settings did meanwhile: a package built now would be saved under the digest of other ones (the message
    says which)."""


def package_digest(**parts) -> str:
    """A digest of ``parts`` (JSON-serialisable, or turned into strings), the library versions and
    the machine. Inductor's global settings and edits to installed code are not in it: bump
    :data:`PACKAGE_FORMAT` when what a package computes changes."""
    import transformers

    from .. import __version__

    versions = {"format": PACKAGE_FORMAT, "torch": torch.__version__, "transformers": transformers.__version__,
                "hf_adaptive_spec": __version__}
    # a package's kernels are built for this CPU's instruction set and run with the thread count
    # of the process that built it
    machine = {"machine": platform.machine(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
               "threads": torch.get_num_threads()}
    text = json.dumps({**parts, **versions, **machine}, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class PackageBuildError(RuntimeError):
    """Exporting or compiling a forward into a package failed (the message names the cause)."""


class PackagedForward:
    """One AOTInductor package per key, loaded from ``directory`` or, the first time anywhere, built.

    Args:
        directory: where packages are kept (made if missing).
        identity: what every key's package depends on besides the key (see :func:`package_digest`).
        inductor_options: inductor settings the packages compile with (e.g. ``{"freezing": True}``).
    """

    def __init__(
        self, directory: str | os.PathLike, identity: dict, inductor_options: dict, description: dict | None = None
    ):
        self.directory = Path(directory)
        self.identity, self.inductor_options = identity, dict(inductor_options)
        #: what a person reads of each package this builds (``hf-adaptive-spec packages``), in its sidecar JSON
        self.description = dict(description or {})
        self._runners: dict[Hashable, object] = {}
        self._lock = threading.Lock()
        #: packages this instance built, and found already built on disk
        self.built, self.loaded = 0, 0

    def path_for(self, key: Hashable) -> Path:
        return self.directory / f"{package_digest(key=key, **self.identity, inductor=self.inductor_options)}.pt2"

    def __call__(
        self, key: Hashable, make_module: Callable[[], torch.nn.Module], *args: torch.Tensor
    ) -> tuple[object, float]:
        """``(make_module()(*args) by the package of key, seconds spent building or loading it)``.

        The module is only made and traced when the package is built; later calls with the same
        key must pass tensors of the same shapes, strides and dtypes (the key must say so: a
        package does not check its inputs)."""
        runner = self._runners.get(key)
        if runner is not None:
            return runner(*args), 0.0
        start = time.perf_counter()
        with self._lock:  # one thread builds or loads a key's package; the others wait for it
            runner = self._runners.get(key) or self._load_or_build(key, make_module, args)
            self._runners[key] = runner
        return runner(*args), time.perf_counter() - start

    def _load_or_build(self, key: Hashable, make_module: Callable[[], torch.nn.Module], args: tuple):
        path = self.path_for(key)
        runner = self._load(path)
        if runner is not None:
            self.loaded += 1
            return runner
        self._build(path, make_module, args, key)
        return self._load(path, just_built=True)

    def _build(self, path: Path, make_module: Callable[[], torch.nn.Module], args: tuple, key: Hashable) -> None:
        """Build the package of ``key`` at ``path``; PackageBuildError (which the caller answers by compiling
        in-process) when it fails, the packages folder's own failures included (read-only, a file, its parent
        missing)."""
        building = self.directory / BUILDING_DIR  # not a *.pt2 of the folder: never loaded half-written
        partial = building / f"{path.stem}-{os.getpid()}-{threading.get_ident()}.pt2"
        try:
            building.mkdir(parents=True, exist_ok=True)
            with torch.no_grad():
                exported = torch.export.export(make_module(), args, strict=False)
                torch._inductor.aoti_compile_and_package(
                    exported,
                    package_path=str(partial),
                    inductor_configs=dict(self.inductor_options),  # it adds its own entries
                )
            write_description(path, {**self.description, "key": str(key)})
            os.replace(partial, path)  # atomic: another process sees no package or a whole one
        except StaleWeightsError:
            raise
        except UnpackageableModel as error:  # the model, not the folder: no folder advice
            raise PackageBuildError(f"No ahead-of-time package can be traced for this model: {error}.") from error
        except Exception as error:
            raise PackageBuildError(
                f"Building an ahead-of-time package of a speculative-decoding forward in {self.directory} failed "
                f"({type(error).__name__}: {error}). {_PACKAGES_ELSEWHERE}"
            ) from error
        finally:  # also on KeyboardInterrupt; a folder that cannot be written holds no partial build either
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
        self.built += 1

    def _load(self, path: Path, just_built: bool = False):
        """The package at ``path`` loaded; None when there is none, or when it is damaged (warned, and removed so
        that it is built again). Its zip's checksums are checked first: a package damaged on disk or in a copy
        loaded and computed wrong tokens, or crashed the process (SIGILL) in its damaged code. A package that does
        not load right after its build (deleted meanwhile by ``hf-adaptive-spec packages``) is a failed build."""
        if not just_built and not os.path.exists(path):  # False also when the folder cannot be read
            return None
        try:
            check_archive(path)
            runner = torch._inductor.aoti_load_package(str(path))
        except Exception as error:
            if just_built:
                raise PackageBuildError(
                    f"The ahead-of-time package {path} was just built but does not load ({type(error).__name__}: "
                    f"{error}; deleted meanwhile by another process?). {_PACKAGES_ELSEWHERE}"
                ) from error
            try:
                path.unlink(missing_ok=True)
                outcome = "building it again"
            except OSError as unremovable:
                outcome = f"it cannot be removed ({unremovable}); building it again"
            warnings.warn(f"The ahead-of-time package {path} does not load ({error}); {outcome}.", stacklevel=3)
            return None
        mark_used(path)
        return runner


#: what a failed build's message tells a person
_PACKAGES_ELSEWHERE = (
    f"To keep packages in another folder: hf_adaptive_spec.fast_path(model, package_dir=...) or ${PACKAGE_DIR_ENV}; "
    "to compile in-process without packages: hf_adaptive_spec.fast_path(model, package_dir=None)."
)


def check_archive(path: Path) -> None:
    """Raise ``zipfile.BadZipFile`` naming the damage when the package (a zip file) at ``path`` fails its checksums
    (FileNotFoundError when there is none). It reads every byte once and checks its CRC: 1 ms for a tiny model's
    2.8 MB package and 0.11 s for a 330 MB zip (a SmolLM2 package's size in bfloat16) from the page cache on a Xeon,
    against about a second to load a package, which reads it whole again (from the page cache this check filled)."""
    with zipfile.ZipFile(path) as archive:
        damaged = archive.testzip()
    if damaged is not None:
        raise zipfile.BadZipFile(f"its member {damaged} fails its checksum: the file was damaged on disk or in a copy")


#: a package's sidecar file: what it was built for, for ``hf-adaptive-spec packages``
DESCRIPTION_SUFFIX = ".json"
#: the subfolder builds are written to before their atomic rename into the packages folder
BUILDING_DIR = "building"
#: a package's file name: the digest of what it depends on (:meth:`PackagedForward.path_for`); in ``BUILDING_DIR``
#: followed by the building process and thread
PACKAGE_NAME = re.compile(r"[0-9a-f]{32}\.pt2")
BUILD_NAME = re.compile(r"[0-9a-f]{32}-\d+-\d+\.pt2")
#: a package's sidecar, and the temporary file it is written through (:func:`write_description`)
SIDECAR_NAME = re.compile(r"[0-9a-f]{32}\.json")
PARTIAL_SIDECAR_NAME = re.compile(r"[0-9a-f]{32}\.json" + TEMPORARY_NAME_SUFFIX)


def write_description(path: Path, description: dict) -> None:
    """Write the sidecar of the package at ``path`` (written before the package, so a package never lacks one)."""
    built = {"built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "torch": torch.__version__}
    text = json.dumps({**description, **built}, sort_keys=True) + "\n"
    write_text_atomically(path.with_suffix(DESCRIPTION_SUFFIX), text)


def mark_used(path: Path) -> None:
    """Set the package's modification time to now: its last use, which ``hf-adaptive-spec packages`` prunes by."""
    with contextlib.suppress(OSError):  # a read-only cache still loads
        os.utime(path)
