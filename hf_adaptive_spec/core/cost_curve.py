"""Which cost curve a ``generate`` call runs on, and which one a learned policy was trained on.

A learned policy's choices are only as good as the verification and drafting costs it was
trained with, and those depend on the device, the dtype and the engine's path (on a CPU, one
forward over 8 tokens costs 1.7x one token eagerly in float32, and about 1x compiled in
bfloat16). The engine compares the two and says so when they differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: the engine's paths: a growing DynamicCache, a StaticCache run eagerly, a StaticCache compiled.
PATHS = ("eager", "static", "compiled")


@dataclass(frozen=True)
class CostCurve:
    """A cost curve's identity: device type (``"cpu"``, ``"cuda"``), dtype name and engine path."""

    device: str
    dtype: str
    path: str

    def __post_init__(self):
        if self.path not in PATHS:
            raise ValueError(f"CostCurve path must be one of {PATHS}, got {self.path!r}.")

    @classmethod
    def of(cls, device: torch.device | str, dtype: torch.dtype | str, path: str) -> CostCurve:
        """Normalised: the device's type only (``cuda:1`` -> ``cuda``), the dtype without ``torch.``."""
        return cls(torch.device(device).type, str(dtype).removeprefix("torch."), path)

    @classmethod
    def from_config(cls, value: dict | None) -> CostCurve | None:
        """A policy config's ``trained_on`` entry (None when the policy records none)."""
        if not value:
            return None
        if not isinstance(value, dict) or set(value) != {"device", "dtype", "path"}:
            raise ValueError(
                f"A policy's trained_on must be a dict with exactly device, dtype and path (as mark_trained_on "
                f"writes it), got {value!r}: fix or remove it in the policy's config.json."
            )
        return cls(**value)

    def to_config(self) -> dict[str, str]:
        """The ``trained_on`` entry of a policy's config (what :meth:`from_config` reads)."""
        return {"device": self.device, "dtype": self.dtype, "path": self.path}

    def __str__(self) -> str:
        return f"{self.device}/{self.dtype}/{self.path}"


#: the CPU matrix instruction sets that set a many-token forward's cost, best first, with torch's check for each
_INSTRUCTION_SETS = (("AMX", "_is_amx_tile_supported"), ("AVX512-BF16", "_is_avx512_bf16_supported"),
                     ("AVX512", "_is_avx512_supported"), ("AVX2", "_is_avx2_supported"))
#: those of them that convert bfloat16 and multiply in float32 (the others multiply it in hardware)
NO_BFLOAT16_MATRIX = ("AVX512", "AVX2")


def cpu_instruction_set() -> str:
    """The best matrix instruction set this CPU offers PyTorch: ``"AMX"`` or ``"AVX512-BF16"`` multiply bfloat16
    in hardware, ``"AVX512"`` and ``"AVX2"`` convert it and multiply in float32. A forward over n tokens in
    bfloat16 costs about one token's with the first two and about n times more without (2-core AMD EPYC,
    SmolLM2 compiled: 8 tokens 1.03x one token on the machine of the results, 3.85x on an AVX2-only one).
    Recorded with every bench run and profile; torch's capability name where none of its checks exist."""
    for name, check in _INSTRUCTION_SETS:
        supported = getattr(torch.cpu, check, None)
        if supported is not None and supported():
            return name
    return torch.backends.cpu.get_cpu_capability()


def cost_curve_mismatch(policy_name: str, trained_on: CostCurve | None, running: CostCurve) -> str | None:
    """The report for a policy trained on another cost curve than the call's (None when they match or
    the policy does not say what it was trained on)."""
    if trained_on is None or trained_on == running:
        return None
    flags = f"--dtype {running.dtype}" + (" --compile" if running.path == "compiled" else "")
    return (
        f"{policy_name} was trained on the {trained_on} cost curve and this call runs on {running}: its choices "
        f"assume other verification costs. Measure this one with `hf-adaptive-spec profile {flags}` and retrain the "
        "policy on it, or use a StaticTreePolicy."
    )
