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

import hashlib
import json
import os
import threading
import time
import warnings
from collections.abc import Hashable
from pathlib import Path

import torch

#: bump when what a package computes changes in a way its digest would not see.
PACKAGE_FORMAT = 1

PACKAGE_DIR_ENV = "HF_ADAPTIVE_SPEC_PACKAGES"


def default_package_dir() -> Path:
    """``$HF_ADAPTIVE_SPEC_PACKAGES``, else ``~/.cache/hf_adaptive_spec/packages``."""
    configured = os.environ.get(PACKAGE_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "hf_adaptive_spec" / "packages"


def weights_digest(module: torch.nn.Module) -> str:
    """A digest of every parameter's and buffer's name, dtype, shape and bytes."""
    digest = hashlib.blake2b(digest_size=16)
    tensors = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    for name, tensor in tensors:
        data = tensor.detach().contiguous().cpu()
        digest.update(f"{name}:{data.dtype}:{tuple(data.shape)};".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def package_digest(**parts) -> str:
    """A digest of ``parts`` (JSON-serialisable, or turned into strings) and the library versions."""
    import transformers

    from .. import __version__

    versions = {"format": PACKAGE_FORMAT, "torch": torch.__version__, "transformers": transformers.__version__,
                "hf_adaptive_spec": __version__}
    text = json.dumps({**parts, **versions}, sort_keys=True, default=str)
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

    def __init__(self, directory: str | os.PathLike, identity: dict, inductor_options: dict):
        self.directory = Path(directory)
        self.identity, self.inductor_options = identity, dict(inductor_options)
        self._runners: dict[Hashable, object] = {}
        self._lock = threading.Lock()
        #: packages this instance built, and found already built on disk
        self.built, self.loaded = 0, 0

    def path_for(self, key: Hashable) -> Path:
        return self.directory / f"{package_digest(key=key, **self.identity, inductor=self.inductor_options)}.pt2"

    def __call__(self, key: Hashable, module: torch.nn.Module, *args: torch.Tensor) -> tuple[object, float]:
        """``(module(*args) by the package of key, seconds spent building or loading it)``.

        ``module`` and ``args`` are only traced when the package is built; later calls with the
        same key must pass the same shapes and dtypes (the key says so)."""
        runner = self._runners.get(key)
        if runner is not None:
            return runner(*args), 0.0
        start = time.perf_counter()
        with self._lock:  # one thread builds or loads a key's package; the others wait for it
            runner = self._runners.get(key) or self._load_or_build(key, module, args)
            self._runners[key] = runner
        return runner(*args), time.perf_counter() - start

    def _load_or_build(self, key: Hashable, module: torch.nn.Module, args: tuple):
        path = self.path_for(key)
        runner = self._load(path) if path.exists() else None
        if runner is not None:
            self.loaded += 1
            return runner
        self._build(path, module, args)
        return self._load(path, required=True)

    def _build(self, path: Path, module: torch.nn.Module, args: tuple) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.partial.pt2")
        try:
            with torch.no_grad():
                exported = torch.export.export(module, args, strict=False)
                torch._inductor.aoti_compile_and_package(exported, package_path=str(partial),
                                                         inductor_configs=dict(self.inductor_options))  # it adds its own entries
        except Exception as error:  # noqa: BLE001 - re-raised with the way out named
            partial.unlink(missing_ok=True)
            raise PackageBuildError(
                f"Building an ahead-of-time package of a speculative-decoding forward failed ({type(error).__name__}: "
                f"{error}). To compile in-process without packages: "
                "hf_adaptive_spec.generation.targets.fast_path(model, package_dir=None)."
            ) from error
        os.replace(partial, path)  # another process never loads a half-written package
        self.built += 1

    def _load(self, path: Path, required: bool = False):
        try:
            runner = torch._inductor.aoti_load_package(str(path))
        except Exception as error:  # noqa: BLE001 - a damaged package is rebuilt, with a word
            if required:
                raise RuntimeError(f"The ahead-of-time package {path} was just built but does not load: {error}") from error
            warnings.warn(f"The ahead-of-time package {path} does not load ({error}); building it again.", stacklevel=3)
            path.unlink(missing_ok=True)
            return None
        return runner
