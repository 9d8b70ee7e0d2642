"""Safetensors-only, strict weights for torch-module artifacts."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import safetensors
import safetensors.torch
import torch
from safetensors import SafetensorError
from torch import nn

from ..core.files import give_files_the_umask_mode
from .errors import ArtifactError, MissingArtifactFileError, PickleWeightsError, WeightsMismatchError
from .location import ArtifactLocation

WEIGHTS_NAME = "model.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")


def save_weights(module: nn.Module, folder: Path) -> None:
    """Write ``module``'s state dict to ``folder/model.safetensors`` (shared tensors stored once), with the mode the
    umask gives (safetensors writes 0600)."""
    safetensors.torch.save_model(module, str(folder / WEIGHTS_NAME))
    give_files_the_umask_mode(folder / WEIGHTS_NAME)


def resolve_safetensors(location: ArtifactLocation, filename: str = WEIGHTS_NAME) -> Path:
    """Local path of the safetensors file ``filename``; never falls back to a pickle.

    Use it with ``filename="adapter_model.safetensors"`` before handing a repo to peft, which
    would otherwise fall back to ``adapter_model.bin``.

    Raises:
        PickleWeightsError: ``filename`` is missing but pickle weights are present.
        MissingArtifactFileError: ``filename`` is missing.
    """
    try:
        return location.resolve(filename)
    except MissingArtifactFileError as error:
        pickles = [name for name in location.list_files() if name.endswith(PICKLE_SUFFIXES)]
        if pickles:
            raise PickleWeightsError(
                f"{location} has no '{filename}', only pickle weights ({', '.join(pickles)}). hf-adaptive-spec "
                "loads safetensors only, because unpickling can run arbitrary code. Convert them with "
                f"`safetensors.torch.save_file(torch.load(path, weights_only=True), '{filename}')`."
            ) from error
        if location.is_local:
            raise MissingArtifactFileError(missing_weights_message(location, filename)) from error
        raise


def missing_weights_message(location: ArtifactLocation, filename: str) -> str:
    """What to do when a folder lacks the weights file ``filename``, naming what the folder holds."""
    files = location.list_files()
    held = ", ".join(files[:10]) + (f" and {len(files) - 10} more" if len(files) > 10 else "") or "no files"
    return (
        f"'{filename}' not found in {location} (it holds {held}). save_pretrained writes it beside config.json: if "
        "the save did not finish or the file was removed, save the artifact there again; if the folder holds another "
        "artifact's files, pass the folder this one was saved to."
    )


def corrupt_weights_error(path, error: Exception) -> ArtifactError:
    """The error for a safetensors file that cannot be read, naming it."""
    return ArtifactError(
        f"'{path}' is not a readable safetensors file ({error}): it may be truncated; save or download it again."
    )


def read_safetensors(path, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Every tensor of the safetensors file ``path``; an error naming the file when it is corrupt."""
    try:
        return safetensors.torch.load_file(str(path), device=device)
    except SafetensorError as error:
        raise corrupt_weights_error(path, error) from error


#: the names ``dtype=`` takes besides a ``torch.dtype`` (torch's, which transformers takes too; "auto" aside)
FLOATING_DTYPE_NAMES = ("float32", "bfloat16", "float16", "float64")


def floating_dtype(value: object, where: str, auto_and_none: str) -> torch.dtype | str | None:
    """``dtype=`` as every loader here reads it (transformers' keyword): a floating ``torch.dtype``, or its name
    (``"bfloat16"``, torch's alias ``"half"`` too) as that dtype, ``"auto"`` and None as they are (each loader says
    what they mean: ``auto_and_none``). Anything else is refused, naming ``where`` (the call) and the accepted values.

    Raises:
        TypeError: naming the value, the accepted names and what ``"auto"`` and None mean.
    """
    if value is None or (isinstance(value, str) and value == "auto"):
        return value
    named = getattr(torch, value, None) if isinstance(value, str) else value
    if isinstance(named, torch.dtype) and named.is_floating_point:
        return named
    names = ", ".join(repr(name) for name in FLOATING_DTYPE_NAMES)
    raise TypeError(
        f"{where}(dtype={value!r}): dtype is a floating torch.dtype (e.g. torch.bfloat16) or its name ({names}), or "
        f"{auto_and_none}."
    )


#: safetensors' names of the floating dtypes
SAFETENSORS_FLOAT_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def saved_floating_dtype(
    location: ArtifactLocation, filename: str = WEIGHTS_NAME, ignore: Collection[str] = ()
) -> torch.dtype | None:
    """The dtype of the floating tensors in ``filename`` when they all share one (None otherwise),
    read from the file's header without loading a tensor. Tensors named in ``ignore`` (those a module keeps in
    float32 whatever its dtype, as :attr:`HubArtifactMixin.float32_keys`) do not count."""
    path = resolve_safetensors(location, filename)
    try:
        with safetensors.safe_open(str(path), framework="pt") as file:
            keys = [key for key in file.keys() if key not in ignore]  # noqa: SIM118 (safe_open has no __iter__)
            names = {file.get_slice(key).get_dtype() for key in keys}
    except SafetensorError as error:
        raise corrupt_weights_error(path, error) from error
    floating = {SAFETENSORS_FLOAT_DTYPES[name] for name in names if name in SAFETENSORS_FLOAT_DTYPES}
    return floating.pop() if len(floating) == 1 else None


def shape_differences(
    saved: dict[str, tuple[int, ...]], expected: dict[str, tuple[int, ...]]
) -> tuple[list[str], list[str], list[str]]:
    """The names ``expected`` has and ``saved`` lacks, those ``saved`` has and ``expected`` lacks, and those of
    another shape in each (names to shapes; each list sorted): what a strict load of saved weights would refuse."""
    missing, unexpected = sorted(expected.keys() - saved.keys()), sorted(saved.keys() - expected.keys())
    misshaped = sorted(name for name in expected.keys() & saved.keys() if tuple(expected[name]) != tuple(saved[name]))
    return missing, unexpected, misshaped


def load_weights(module: nn.Module, location: ArtifactLocation, filename: str = WEIGHTS_NAME) -> None:
    """Load ``filename`` into ``module`` strictly: every key present, none extra, shapes equal.

    Raises:
        WeightsMismatchError: the file does not fit the module.
    """
    path = resolve_safetensors(location, filename)
    name = type(module).__name__
    try:
        missing, unexpected = safetensors.torch.load_model(module, path, strict=False)
    except SafetensorError as error:
        raise corrupt_weights_error(path, error) from error
    except RuntimeError as error:  # shape mismatches
        raise WeightsMismatchError(f"'{filename}' of {location} does not fit {name}: {error}") from error
    if missing or unexpected:
        raise WeightsMismatchError(
            f"'{filename}' of {location} does not match {name}: missing keys {sorted(missing)}, unexpected keys "
            f"{sorted(unexpected)}. Was it saved by another class, or with other constructor arguments?"
        )
