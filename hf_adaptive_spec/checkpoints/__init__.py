"""Checkpoints shipped inside the package for the default model (Hub layout, safetensors)."""

from __future__ import annotations

from pathlib import Path

#: name -> folder of each shipped checkpoint (for SmolLM2-135M-Instruct). The three policies are
#: the outputs of their recipes (trainers/recipes/ltd_smollm2_skip.yaml, radar_smollm2_skip.yaml,
#: resps_smollm2_plain.yaml with the bench-fitted profile; each card gives its command), copied here.
SHIPPED = {
    "eagle3": "eagle3-smollm2-135m-instruct",
    "ltd": "ltd-smollm2-135m-instruct",
    "resps": "resps-smollm2-135m-instruct",
    "radar": "radar-smollm2-135m-instruct",
    "dvi": "dvi-smollm2-135m-instruct",
}


def shipped_checkpoint(name: str) -> Path:
    """Folder of the shipped ``name`` checkpoint; raises naming what is missing."""
    if name not in SHIPPED:
        raise ValueError(f"No shipped checkpoint named {name!r}; shipped: {', '.join(SHIPPED)}.")
    folder = Path(__file__).parent / SHIPPED[name]
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"The shipped {name} checkpoint is missing at {folder}: reinstall hf-adaptive-spec, or pass a checkpoint path."
        )
    return folder
