"""Which cost curve a ``generate`` call runs on, and which one a learned policy was trained on.

A learned policy's choices are only as good as the verification and drafting costs it was
trained with, and those depend on the device, the dtype, the engine's path and the processor's
matrix instructions (on a CPU, one forward over 8 tokens costs 1.7x one token eagerly in float32;
compiled in bfloat16, about 1x with bfloat16 matrix instructions and 3.85x without). The engine
compares the two and says so when they differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: the engine's paths: a growing DynamicCache, a StaticCache run eagerly, a StaticCache compiled.
PATHS = ("eager", "static", "compiled")
_CURVE_KEYS = {"device", "dtype", "path"}


@dataclass(frozen=True)
class CostCurve:
    """A cost curve's identity: device type (``"cpu"``, ``"cuda"``), dtype name, engine path and the processor's
    matrix instruction set (:func:`instruction_set_of`; None where it was not recorded)."""

    device: str
    dtype: str
    path: str
    instruction_set: str | None = None

    def __post_init__(self):
        if self.path not in PATHS:
            raise ValueError(f"CostCurve path must be one of {PATHS}, got {self.path!r}.")

    @classmethod
    def of(cls, device: torch.device | str, dtype: torch.dtype | str, path: str) -> CostCurve:
        """This process's curve on ``device``: its type only (``cuda:1`` -> ``cuda``), the dtype without
        ``torch.``, and the instruction set of the processor it names."""
        return cls(torch.device(device).type, str(dtype).removeprefix("torch."), path, instruction_set_of(device))

    @classmethod
    def parse(cls, text: str) -> CostCurve:
        """The curve ``str(curve)`` wrote: ``device/dtype/path``, optionally followed by `` (INSTRUCTION_SET)``.

        Raises:
            ValueError: naming the form, for text of another form or a dtype torch does not have.
        """
        key, _, rest = text.partition(" (")
        parts = key.split("/")
        instruction_set = rest.removesuffix(")") if rest.endswith(")") else None
        dtype = getattr(torch, parts[1], None) if len(parts) == 3 else None
        if not isinstance(dtype, torch.dtype) or bool(rest) != bool(instruction_set) or not _is_device_type(parts[0]):
            raise ValueError(f"{text!r} is not a cost curve: write device/dtype/path, e.g. 'cpu/bfloat16/compiled' "
                             "(str of a CostCurve, optionally with its ' (INSTRUCTION_SET)'), device a device type, "
                             f"dtype a torch dtype's name and path one of {PATHS}.")
        return cls(parts[0], str(dtype).removeprefix("torch."), parts[2], instruction_set)

    @classmethod
    def from_config(cls, value: dict | None) -> CostCurve | None:
        """A policy config's ``trained_on`` entry (None when the policy records none)."""
        if not value:
            return None
        if not isinstance(value, dict) or not _CURVE_KEYS <= set(value) <= _CURVE_KEYS | {"instruction_set"}:
            raise ValueError(
                f"A policy's trained_on must be a dict with device, dtype and path, and optionally instruction_set "
                f"(as mark_trained_on writes it), got {value!r}: fix or remove it in the policy's config.json."
            )
        return cls(**value)

    def to_config(self) -> dict[str, str]:
        """The ``trained_on`` entry of a policy's config (what :meth:`from_config` reads)."""
        config = {"device": self.device, "dtype": self.dtype, "path": self.path}
        return config if self.instruction_set is None else {**config, "instruction_set": self.instruction_set}

    @property
    def key(self) -> str:
        """``device/dtype/path``, the curve without its instruction set (how shipped variants are named)."""
        return f"{self.device}/{self.dtype}/{self.path}"

    def fits(self, other: CostCurve) -> bool:
        """Whether a policy trained on this curve fits a call on ``other``: the same device, dtype and path, and
        the same instruction set unless one of them did not record it."""
        unknown = self.instruction_set is None or other.instruction_set is None
        return self.key == other.key and (unknown or self.instruction_set == other.instruction_set)

    def __str__(self) -> str:
        return self.key if self.instruction_set is None else f"{self.key} ({self.instruction_set})"


def _is_device_type(name: str) -> bool:
    """Whether ``name`` is a device type as a curve records it (``cpu``, ``cuda``; not ``cuda:0`` nor a typo)."""
    try:
        return torch.device(name).type == name
    except RuntimeError:
        return False


#: the CPU matrix instruction sets that set a many-token forward's cost, best first, with torch's check for each
_INSTRUCTION_SETS = (("AMX", "_is_amx_tile_supported"), ("AVX512-BF16", "_is_avx512_bf16_supported"),
                     ("AVX512", "_is_avx512_supported"), ("AVX2", "_is_avx2_supported"))
#: those of them that convert bfloat16 and multiply in float32 (the others multiply it in hardware)
NO_BFLOAT16_MATRIX = ("AVX512", "AVX2")


def converts_bfloat16(dtype: str, instruction_set: str | None) -> bool:
    """Whether a ``dtype`` forward on a processor with ``instruction_set`` converts bfloat16 and multiplies it in
    float32: a forward over n tokens then costs several of one token's (8 tokens, compiled: 3.85x on an AVX2-only
    EPYC, 2.25x on an AVX-512 Xeon without AVX512-BF16), and a draft tree pays for little."""
    return dtype == "bfloat16" and instruction_set in NO_BFLOAT16_MATRIX


#: what such a CPU does with bfloat16, as the engine's hint and profile's note say it
CONVERTS_BFLOAT16 = (
    "has no bfloat16 matrix instructions (AMX, AVX512-BF16): it converts bfloat16 and multiplies in float32"
)
#: what the lossless float32 engine measured against compiled bfloat16 stock on CPUs that convert bfloat16 (2 cores,
#: SmolLM2, Spec-Bench, the 4-token prompt-lookup branch; results/README.md, sessions 55, 97 and 98)
FLOAT32_ENGINE_MEASURED = (
    "the float32 engine, lossless, ran 2.05x compiled bfloat16 stock on an AVX-512 Xeon without AVX512-BF16 with its "
    "float32 profile's LookupFirstPolicy 2/4/5 and 1.91x with the tree 2/4/8 drafted every cycle, 1.32x on an "
    "AVX2-only EPYC: results/README.md"
)


def bfloat16_conversion_hint(curve: CostCurve) -> str | None:
    """For a bfloat16 call on a CPU that converts bfloat16 (:func:`converts_bfloat16`), what the engine says once: the
    float32 engine was measured faster on such CPUs, and how to use it. None for any other curve."""
    if curve.device != "cpu" or not converts_bfloat16(curve.dtype, curve.instruction_set):
        return None
    return (
        f"This CPU ({curve.instruction_set}) {CONVERTS_BFLOAT16}, so verifying a draft tree costs several one-token "
        "forwards and "
        f"speculation gains little in bfloat16 here ({FLOAT32_ENGINE_MEASURED}). Load the model in float32 (no "
        "dtype) and let `hf-adaptive-spec record` then `hf-adaptive-spec profile --dtype float32 --compile --recording "
        "REC` choose the tree for this machine, or use StaticTreePolicy(depth=2, top_k=4, total_tokens=8) with "
        "prompt_lookup_num_tokens=4."
    )


def cpu_instruction_set() -> str:
    """The best matrix instruction set this CPU offers PyTorch: ``"AMX"`` or ``"AVX512-BF16"`` multiply bfloat16
    in hardware, ``"AVX512"`` and ``"AVX2"`` convert it and multiply in float32. A forward over a few tokens in
    bfloat16 costs about one token's with the first two and several without (2 cores, SmolLM2 compiled, 8 tokens
    against one: 1.03x on an AVX512-BF16 EPYC, 1.43x on an AMX Xeon, 2.25x on an AVX512 Xeon, 3.85x on an AVX2 EPYC).
    Recorded with every bench run, profile and cost curve; torch's capability name where none of its checks
    exist."""
    for name, check in _INSTRUCTION_SETS:
        supported = getattr(torch.cpu, check, None)
        if supported is not None and supported():
            return name
    return torch.backends.cpu.get_cpu_capability()


def instruction_set_of(device: torch.device | str) -> str | None:
    """The matrix instruction set of the processor ``device`` names: :func:`cpu_instruction_set` for a CPU, the
    compute capability (``"sm_90"``) for a CUDA device, None for others (and for CUDA in a build without it)."""
    device = torch.device(device)
    if device.type == "cpu":
        return cpu_instruction_set()
    if device.type == "cuda" and torch.cuda.is_available():
        return "sm_{}{}".format(*torch.cuda.get_device_capability(device))
    return None


def cost_curve_mismatch(
    policy_name: str, trained_on: CostCurve | None, running: CostCurve, learned: bool = True
) -> str | None:
    """The report for a policy trained on another cost curve than the call's (None when it fits, see
    :meth:`CostCurve.fits`, or the policy does not say what it was trained on). ``learned=False``: a static or
    heuristic policy whose settings were chosen for that curve (``mark_trained_on``), re-chosen rather than
    retrained."""
    if trained_on is None or trained_on.fits(running):
        return None
    path_flag = {"compiled": " --compile", "static": " --static"}.get(running.path, "")
    flags = f"--device {running.device} --dtype {running.dtype}{path_flag}"
    if not learned:
        return (
            f"{policy_name} was chosen for the {trained_on} cost curve and this call runs on {running}: its settings "
            f"assume other verification costs. `hf-adaptive-spec profile {flags} --recording DIR` (a recording of "
            "the drafter) measures this one and recommends the tree for it."
        )
    return (
        f"{policy_name} was trained on the {trained_on} cost curve and this call runs on {running}: its choices "
        f"assume other verification costs. Measure this one with `hf-adaptive-spec profile {flags}` and retrain the "
        "policy on it, or use a StaticTreePolicy."
    )
